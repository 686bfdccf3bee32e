// A small harness that drives Kafka's own Java client (kafka-clients) against a broker.
//
// Compiled at test time by compat_tests/java_harness.py; every result is one JSON object
// per line on stdout, for the Python test to parse. Bytes travel as lowercase hex so that
// they compare exactly; a null key, value or header value is JSON null.
//
//   java KafkaCompat metadata <bootstrap>
//   java KafkaCompat admin-create-describe-delete <bootstrap> <topic> <partitions>
//   java KafkaCompat produce <bootstrap> <topic> <compression>   < records
//   java KafkaCompat consume <bootstrap> <topic> <count> [<partition>=<offset>,...]
//
// `produce` reads one record per stdin line: <key> TAB <value> TAB <headers>, where key and
// value are hex or "-" for null, and headers are comma-separated <hex name>:<hex value or ->.
// `consume` assigns every partition of the topic (no group, no commits), seeks each to the
// given offset or to the beginning, and polls until <count> records or the time limit.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KafkaCompat {
    private static final long ADMIN_TIMEOUT_MS = 20_000;
    private static final long CONSUME_TIMEOUT_MS = 90_000;
    private static final long EXTRA_POLL_MS = 300;

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            usage();
        }
        String bootstrap = args[1];
        switch (args[0]) {
            case "metadata" -> metadata(bootstrap);
            case "admin-create-describe-delete" -> admin(bootstrap, args[2], Integer.parseInt(args[3]));
            case "produce" -> produce(bootstrap, args[2], args[3]);
            case "consume" -> consume(bootstrap, args[2], Integer.parseInt(args[3]), args.length > 4 ? args[4] : "");
            default -> usage();
        }
        System.out.flush();
    }

    private static void usage() {
        System.err.println("usage: KafkaCompat metadata|admin-create-describe-delete|produce|consume <bootstrap> ...");
        System.exit(2);
    }

    // ---- admin ---------------------------------------------------------------------------

    /** Runs one admin step; a failure is reported as an error line and the harness goes on. */
    private interface Step {
        void run() throws Exception;
    }

    private static void step(String name, Step body) {
        try {
            body.run();
        } catch (Exception error) {
            Throwable cause = error instanceof ExecutionException && error.getCause() != null ? error.getCause() : error;
            emit(new Json().put("type", "error").put("step", name)
                    .put("error", cause.getClass().getSimpleName()).put("message", String.valueOf(cause.getMessage())));
        }
    }

    private static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        return Admin.create(props);
    }

    private static <T> T get(KafkaFuture<T> future) throws Exception {
        return future.get(ADMIN_TIMEOUT_MS, TimeUnit.MILLISECONDS);
    }

    private static void metadata(String bootstrap) {
        try (Admin admin = admin(bootstrap)) {
            step("describeCluster", () -> {
                DescribeClusterResult cluster = admin.describeCluster();
                List<Json> nodes = new ArrayList<>();
                for (Node node : get(cluster.nodes())) {
                    nodes.add(node(node));
                }
                Node controller = get(cluster.controller());
                emit(new Json().put("type", "cluster").put("cluster_id", get(cluster.clusterId()))
                        .put("controller", controller == null ? null : controller.id()).put("nodes", nodes));
            });
            step("listTopics", () -> emit(new Json().put("type", "topics")
                    .put("names", new ArrayList<>(new java.util.TreeSet<>(get(admin.listTopics().names()))))));
        }
    }

    private static void admin(String bootstrap, String topic, int partitions) {
        try (Admin admin = admin(bootstrap)) {
            step("createTopics", () -> {
                NewTopic request = new NewTopic(topic, partitions, (short) 1).configs(Map.of("retention.ms", "3600000"));
                var result = admin.createTopics(List.of(request));
                get(result.all());
                emit(new Json().put("type", "created").put("topic", topic)
                        .put("topic_id", get(result.topicId(topic)).toString())
                        .put("partitions", get(result.numPartitions(topic))));
            });
            step("createTopicsAgain", () -> {
                get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all());
                emit(new Json().put("type", "created_again").put("topic", topic));
            });
            step("describeTopics", () -> emit(describe(admin, topic, "described")));
            step("listTopics", () -> emit(new Json().put("type", "topics")
                    .put("names", new ArrayList<>(new java.util.TreeSet<>(get(admin.listTopics().names()))))));
            step("describeConfigs", () -> {
                ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                Config config = get(admin.describeConfigs(List.of(resource)).all()).get(resource);
                ConfigEntry retention = config.get("retention.ms");
                emit(new Json().put("type", "configs").put("retention.ms", retention == null ? null : retention.value())
                        .put("source", retention == null ? null : retention.source().name()));
            });
            step("createPartitions", () -> {
                get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(partitions + 1))).all());
                emit(describe(admin, topic, "described_after_create_partitions"));
            });
            step("deleteTopics", () -> {
                get(admin.deleteTopics(List.of(topic)).all());
                emit(new Json().put("type", "deleted").put("topic", topic));
            });
            step("describeDeletedTopic", () -> emit(describe(admin, topic, "described_after_delete")));
        }
    }

    private static Json describe(Admin admin, String topic, String type) throws Exception {
        TopicDescription description = get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
        List<Json> partitions = new ArrayList<>();
        for (TopicPartitionInfo info : description.partitions()) {
            partitions.add(new Json().put("partition", info.partition())
                    .put("leader", info.leader() == null ? null : info.leader().id())
                    .put("replicas", info.replicas().stream().map(Node::id).toList())
                    .put("isr", info.isr().stream().map(Node::id).toList()));
        }
        return new Json().put("type", type).put("topic", description.name())
                .put("topic_id", description.topicId().toString()).put("internal", description.isInternal())
                .put("partitions", partitions);
    }

    private static Json node(Node node) {
        return new Json().put("id", node.id()).put("host", node.host()).put("port", node.port());
    }

    // ---- producer ------------------------------------------------------------------------

    private static void produce(String bootstrap, String topic, String compression) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "2000000");
        // enable.idempotence and acks are left at the client's defaults (true and all in 4.x).
        long started = System.nanoTime();
        AtomicInteger failures = new AtomicInteger();
        int count = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
             BufferedReader input = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII))) {
            ProducerConfig effective = new ProducerConfig(props);  // what the client runs with, defaults applied
            emit(new Json().put("type", "producer_config")
                    .put("enable.idempotence", effective.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG))
                    .put("acks", effective.getString(ProducerConfig.ACKS_CONFIG)));
            String line;
            while ((line = input.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                String[] fields = line.split("\t", -1);
                RecordHeaders headers = new RecordHeaders();
                if (fields.length > 2 && !fields[2].isEmpty()) {
                    for (String header : fields[2].split(",")) {
                        String[] parts = header.split(":", 2);
                        headers.add(new String(unhex(parts[0]), StandardCharsets.UTF_8), unhex(parts[1]));
                    }
                }
                int index = count++;
                ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, null, unhex(fields[0]), unhex(fields[1]), headers);
                producer.send(record, (metadata, error) -> {
                    if (error != null) {
                        failures.incrementAndGet();
                        emit(new Json().put("type", "send_error").put("index", index)
                                .put("error", error.getClass().getSimpleName()).put("message", String.valueOf(error.getMessage())));
                    } else {
                        emit(new Json().put("type", "ack").put("index", index)
                                .put("partition", metadata.partition()).put("offset", metadata.offset()));
                    }
                });
            }
            producer.flush();
        }
        emit(new Json().put("type", "produced").put("count", count).put("errors", failures.get())
                .put("elapsed_ms", (System.nanoTime() - started) / 1_000_000));
    }

    // ---- consumer ------------------------------------------------------------------------

    private static void consume(String bootstrap, String topic, int count, String seeks) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        Map<Integer, Long> offsets = new TreeMap<>();
        for (String seek : seeks.split(",")) {
            if (!seek.isEmpty()) {
                String[] parts = seek.split("=", 2);
                offsets.put(Integer.parseInt(parts[0]), Long.parseLong(parts[1]));
            }
        }
        long started = System.nanoTime();
        int received = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(15))) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            List<TopicPartition> fromStart = new ArrayList<>();
            for (TopicPartition partition : partitions) {
                Long offset = offsets.get(partition.partition());
                if (offset == null) {
                    fromStart.add(partition);
                } else {
                    consumer.seek(partition, offset);
                }
            }
            if (!fromStart.isEmpty()) {  // an empty collection would mean every assigned partition
                consumer.seekToBeginning(fromStart);
            }
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CONSUME_TIMEOUT_MS);
            while (received < count && System.nanoTime() < deadline) {
                received += emitRecords(consumer.poll(Duration.ofMillis(200)));
            }
            received += emitRecords(consumer.poll(Duration.ofMillis(EXTRA_POLL_MS)));  // more than asked for is a failure too
        }
        emit(new Json().put("type", "consumed").put("count", received)
                .put("elapsed_ms", (System.nanoTime() - started) / 1_000_000));
    }

    private static int emitRecords(Iterable<ConsumerRecord<byte[], byte[]>> records) {
        int emitted = 0;
        for (ConsumerRecord<byte[], byte[]> record : records) {
            emitted++;
            List<Object> headers = new ArrayList<>();
            for (Header header : record.headers()) {
                headers.add(java.util.Arrays.asList(header.key(), hexOrNull(header.value())));
            }
            emit(new Json().put("type", "record").put("partition", record.partition()).put("offset", record.offset())
                    .put("timestamp", record.timestamp()).put("key", hexOrNull(record.key()))
                    .put("value", hexOrNull(record.value())).put("headers", headers));
        }
        return emitted;
    }

    // ---- encoding ------------------------------------------------------------------------

    private static byte[] unhex(String text) {
        if (text.equals("-")) {
            return null;
        }
        byte[] bytes = new byte[text.length() / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) Integer.parseInt(text, 2 * i, 2 * i + 2, 16);
        }
        return bytes;
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private static String hexOrNull(byte[] bytes) {
        if (bytes == null) {
            return null;
        }
        char[] chars = new char[bytes.length * 2];
        for (int i = 0; i < bytes.length; i++) {
            chars[2 * i] = HEX[(bytes[i] >> 4) & 0xf];
            chars[2 * i + 1] = HEX[bytes[i] & 0xf];
        }
        return new String(chars);
    }

    /** Producer callbacks run on the client's I/O thread, so lines are written whole under a lock. */
    private static synchronized void emit(Json line) {
        System.out.println(line);
    }

    /** Just enough JSON writing for flat objects of strings, numbers, booleans, lists and nested objects. */
    private static final class Json {
        private final Map<String, Object> fields = new java.util.LinkedHashMap<>();

        Json put(String name, Object value) {
            fields.put(name, value);
            return this;
        }

        @Override
        public String toString() {
            StringBuilder out = new StringBuilder();
            write(out, fields);
            return out.toString();
        }

        private static void write(StringBuilder out, Object value) {
            if (value == null) {
                out.append("null");
            } else if (value instanceof Json json) {
                write(out, json.fields);
            } else if (value instanceof Map<?, ?> map) {
                out.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> entry : map.entrySet()) {
                    out.append(first ? "" : ",");
                    first = false;
                    write(out, String.valueOf(entry.getKey()));
                    out.append(':');
                    write(out, entry.getValue());
                }
                out.append('}');
            } else if (value instanceof Collection<?> list) {
                out.append('[');
                boolean first = true;
                for (Object item : list) {
                    out.append(first ? "" : ",");
                    first = false;
                    write(out, item);
                }
                out.append(']');
            } else if (value instanceof Number || value instanceof Boolean) {
                out.append(value);
            } else {
                out.append('"');
                for (char c : value.toString().toCharArray()) {
                    switch (c) {
                        case '"' -> out.append("\\\"");
                        case '\\' -> out.append("\\\\");
                        default -> {
                            if (c < 0x20) {
                                out.append(String.format("\\u%04x", (int) c));
                            } else {
                                out.append(c);
                            }
                        }
                    }
                }
                out.append('"');
            }
        }
    }
}
