"""The pytest plugin's fixtures give a broker stock clients can use."""

import confluent_kafka.admin


def test_fixture_broker_answers_metadata(kbroker):
    metadata = confluent_kafka.admin.AdminClient({"bootstrap.servers": kbroker.bootstrap}).list_topics(timeout=10)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [(kbroker.host, kbroker.port)]
    assert metadata.cluster_id == kbroker.broker.cluster_id


def test_each_test_gets_its_own_data_directory(kbroker, kbroker_session):
    assert kbroker.data_dir != kbroker_session.data_dir
    assert kbroker.port != kbroker_session.port
