"""The `kbroker` command."""

import sys

from kbroker import __version__


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("--version", "-V"):
        print(f"kbroker {__version__}")
        return 0
    print(f"kbroker {__version__}: the broker itself lands with the broker issue", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
