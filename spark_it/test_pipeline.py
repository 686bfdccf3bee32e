"""The example pipeline (spark_it/pipeline.py) run as its README says: feed, run, show."""

import pathlib
import subprocess
import sys

from spark_it.pipeline import expected_counts, latest_counts

CLICKS = 3000
REPO = pathlib.Path(__file__).resolve().parents[1]


def pipeline(broker, *args, timeout_s=300):
    command = [sys.executable, "-m", "spark_it.pipeline", "--bootstrap", broker.bootstrap, *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=REPO)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


def test_click_counts_end_to_end(spark, broker, tmp_path):
    """``spark`` is requested only so this skips with the rest when the connector is missing."""
    assert f"fed {CLICKS} clicks" in pipeline(broker, "feed", "--count", str(CLICKS))
    pipeline(broker, "run", "--checkpoint", str(tmp_path / "checkpoint"))
    assert latest_counts(broker.bootstrap, "page-counts") == expected_counts(CLICKS)
    shown = pipeline(broker, "show").splitlines()
    assert len(shown) == len(expected_counts(CLICKS))
