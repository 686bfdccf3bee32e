// A small harness that drives Kafka's own Java client (kafka-clients) against a broker.
//
// Compiled at test time by compat_tests/java_harness.py; every result is one JSON object
// per line on stdout, for the Python test to parse. Bytes travel as lowercase hex so that
// they compare exactly; a null key, value or header value is JSON null.
//
//   java KafkaCompat metadata <bootstrap>
//   java KafkaCompat admin-create-describe-delete <bootstrap> <topic> <partitions>
//   java KafkaCompat alter-configs <bootstrap> <topic> <OP>:<name>[=<value>] ...
//   java KafkaCompat broker-configs <bootstrap> <node id> <node id>|default/<OP>:<name>[=<value>] ...
//   java KafkaCompat offsets <bootstrap> <topic> earliest|latest|max|<timestamp ms> ...
//   java KafkaCompat delete-records <bootstrap> <topic> <partition>:<offset>,...
//   java KafkaCompat produce <bootstrap> <topic> <compression> [<producer property>=<value> ...]  < records
//   java KafkaCompat consume <bootstrap> <topic> <count> [partitions=0,2] [seeks=0:5,1:3]
//                            [isolation=read_committed|read_uncommitted] [reset=none|earliest|latest]
//                            [group=<id> [protocol=classic|consumer]]
//   java KafkaCompat share <bootstrap> <group>:<consumers>:<deliveries>:<rule>,... ...
//   java KafkaCompat share-hold <bootstrap> <group>
//
// `alter-configs` applies each operation (SET, DELETE, APPEND, SUBTRACT) to the topic in its own
// IncrementalAlterConfigs request and describes the named config after it.
// `broker-configs` applies each operation to a BROKER resource (a node id, or the cluster-wide default),
// each in its own request, then describes the node and the default, with synonyms, for the names used.
// `offsets` asks the admin client (ListOffsets) and then a consumer (beginningOffsets,
// endOffsets, offsetsForTimes; it has no max-timestamp lookup) about every partition.
// `produce` reads one record per stdin line: <key> TAB <value> TAB <headers> [TAB <partition>
// TAB <timestamp>], where key and value are hex or "-" for null, headers are comma-separated
// <hex name>:<hex value or ->, and a missing or "-" partition or timestamp is left to the client.
// `consume` assigns the topic's partitions (all, or those listed; no group, no commits), seeks
// them to the beginning, or only the listed ones to the given offsets, and polls until <count>
// records, a time limit, or an invalid-offset error (reported as a poll_error line).
// With `group=` it subscribes instead, in that consumer group (group.protocol classic by default,
// or consumer for KIP-848), commits what it read and reports the committed offsets and its assignment.
// `share` runs each plan in turn: <consumers> KafkaShareConsumers (KIP-932, explicit acknowledgement
// mode) in share group <group>, subscribed to the topic of the same name and polled in turn. Each record
// is acknowledged by the first rule that matches it (<offset>[@<delivery count>]=<type>, or *=<type>;
// ACCEPT where none does) and each poll's acknowledgements are sent with commitSync. After <deliveries>
// records (redeliveries count) it polls every consumer for SHARE_QUIET_MS more: what comes then is
// reported too.
// `share-hold` polls one share consumer until records come, reports them and a holding line, and then
// holds them unacknowledged (polling no more) until it is killed or SHARE_HOLD_MS pass.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DeleteRecordsResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.InvalidOffsetException;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KafkaCompat {
    private static final long ADMIN_TIMEOUT_MS = 20_000;
    private static final Duration LOOKUP_TIMEOUT = Duration.ofSeconds(15);
    private static final long CONSUME_TIMEOUT_MS = 90_000;
    private static final long EXTRA_POLL_MS = 300;
    private static final long SHARE_TIMEOUT_MS = 30_000;
    private static final long SHARE_QUIET_MS = 2_000;
    private static final long SHARE_HOLD_MS = 60_000;
    private static final Duration SHARE_POLL = Duration.ofMillis(100);

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            usage();
        }
        String bootstrap = args[1];
        switch (args[0]) {
            case "metadata" -> metadata(bootstrap);
            case "admin-create-describe-delete" -> admin(bootstrap, args[2], Integer.parseInt(args[3]));
            case "alter-configs" -> alterConfigs(bootstrap, new ConfigResource(ConfigResource.Type.TOPIC, args[2]),
                    from(args, 3));
            case "group-configs" -> alterConfigs(bootstrap, new ConfigResource(ConfigResource.Type.GROUP, args[2]),
                    from(args, 3));
            case "broker-configs" -> brokerConfigs(bootstrap, args[2], from(args, 3));
            case "offsets" -> offsets(bootstrap, args[2], from(args, 3));
            case "delete-records" -> deleteRecords(bootstrap, args[2], args[3]);
            case "produce" -> produce(bootstrap, args[2], args[3], options(from(args, 4)));
            case "consume" -> consume(bootstrap, args[2], Integer.parseInt(args[3]), options(from(args, 4)));
            case "transact" -> transact(bootstrap, args[2], args[3], args[4], options(from(args, 5)));
            case "share" -> from(args, 2).forEach(plan -> step("share " + plan, () -> share(bootstrap, plan)));
            case "share-hold" -> shareHold(bootstrap, args[2]);
            default -> usage();
        }
        System.out.flush();
    }

    private static List<String> from(String[] args, int first) {
        return Arrays.asList(args).subList(Math.min(first, args.length), args.length);
    }

    private static void usage() {
        System.err.println("usage: KafkaCompat metadata|admin-create-describe-delete|alter-configs|group-configs|broker-configs|offsets"
                + "|delete-records"
                + "|produce|consume|transact|share|share-hold <bootstrap> ...");
        System.exit(2);
    }

    /** name=value arguments, in order. */
    private static Map<String, String> options(List<String> arguments) {
        Map<String, String> options = new LinkedHashMap<>();
        for (String argument : arguments) {
            String[] parts = argument.split("=", 2);
            if (parts.length != 2) {
                throw new IllegalArgumentException("expected name=value, got " + argument);
            }
            options.put(parts[0], parts[1]);
        }
        return options;
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
            step("listTopics", () -> emit(topicNames(admin)));
        }
    }

    private static void admin(String bootstrap, String topic, int partitions) {
        Map<String, String> configs = Map.of("retention.ms", "3600000", "max.message.bytes", "200000");
        AtomicReference<Uuid> topicId = new AtomicReference<>();
        try (Admin admin = admin(bootstrap)) {
            step("createTopics", () -> {
                CreateTopicsResult result = admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs)));
                get(result.all());
                topicId.set(get(result.topicId(topic)));
                emit(created(result, topic, "created", configs.keySet()).put("topic_id", topicId.get().toString()));
            });
            step("createTopicsAgain", () -> {
                get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all());
                emit(new Json().put("type", "created_again").put("topic", topic));
            });
            // validateOnly answers as a creation would, configs included, and creates nothing.
            step("createTopicsValidateOnly", () -> {
                String dryRun = topic + "-dry-run";
                NewTopic request = new NewTopic(dryRun, partitions + 1, (short) 1).configs(Map.of("cleanup.policy", "compact"));
                CreateTopicsResult result = admin.createTopics(List.of(request), new CreateTopicsOptions().validateOnly(true));
                get(result.all());
                emit(created(result, dryRun, "validated", List.of("cleanup.policy")));
            });
            step("createTopicsValidateOnlyBadConfig", () -> {
                NewTopic request = new NewTopic(topic + "-bad", partitions, (short) 1).configs(Map.of("cleanup.policy", "sometimes"));
                get(admin.createTopics(List.of(request), new CreateTopicsOptions().validateOnly(true)).all());
                emit(new Json().put("type", "validated_bad_config"));
            });
            step("describeTopics", () -> emit(description(
                    get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic), "described")));
            step("describeTopicsById", () -> emit(description(
                    get(admin.describeTopics(TopicCollection.ofTopicIds(List.of(topicId.get()))).allTopicIds()).get(topicId.get()),
                    "described_by_id")));
            step("listTopics", () -> emit(topicNames(admin)));
            step("describeConfigs", () -> {
                ConfigEntry retention = topicConfig(admin, topic).get("retention.ms");
                emit(new Json().put("type", "configs").put("retention.ms", retention == null ? null : retention.value())
                        .put("source", retention == null ? null : retention.source().name()));
            });
            step("createPartitions", () -> {
                get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(partitions + 1))).all());
                emit(description(get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic),
                        "described_after_create_partitions"));
            });
            step("deleteTopicsById", () -> {
                get(admin.deleteTopics(TopicCollection.ofTopicIds(List.of(topicId.get()))).all());
                emit(new Json().put("type", "deleted").put("topic_id", topicId.get().toString()));
            });
            step("describeDeletedTopic", () -> get(admin.describeTopics(List.of(topic)).allTopicNames()));
            step("describeDeletedTopicById", () ->
                    get(admin.describeTopics(TopicCollection.ofTopicIds(List.of(topicId.get()))).allTopicIds()));
        }
    }

    /** What a CreateTopics answer says about one topic: partitions, replication and the named configs. */
    private static Json created(CreateTopicsResult result, String topic, String type, Collection<String> configNames)
            throws Exception {
        Config config = get(result.config(topic));
        Map<String, Object> configs = new TreeMap<>();
        for (String name : configNames) {
            configs.put(name, configEntry(config.get(name)));
        }
        return new Json().put("type", type).put("topic", topic).put("partitions", get(result.numPartitions(topic)))
                .put("replication_factor", get(result.replicationFactor(topic))).put("configs", configs);
    }

    private static Json description(TopicDescription description, String type) {
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

    private static Json topicNames(Admin admin) throws Exception {
        return new Json().put("type", "topics").put("names", new ArrayList<>(new TreeSet<>(get(admin.listTopics().names()))));
    }

    private static Json node(Node node) {
        return new Json().put("id", node.id()).put("host", node.host()).put("port", node.port());
    }

    private static Config topicConfig(Admin admin, String topic) throws Exception {
        return configOf(admin, new ConfigResource(ConfigResource.Type.TOPIC, topic));
    }

    private static Config configOf(Admin admin, ConfigResource resource) throws Exception {
        return get(admin.describeConfigs(List.of(resource)).all()).get(resource);
    }

    private static Json configEntry(ConfigEntry entry) {
        return entry == null ? null : new Json().put("value", entry.value()).put("source", entry.source().name());
    }

    // ---- configs -------------------------------------------------------------------------

    /** incrementalAlterConfigs on a topic or a group, each operation followed by describeConfigs' entry. */
    private static void alterConfigs(String bootstrap, ConfigResource resource, List<String> operations) {
        try (Admin admin = admin(bootstrap)) {
            for (String operation : operations) {
                String[] opAndConfig = operation.split(":", 2);
                String[] nameAndValue = opAndConfig[1].split("=", 2);
                String name = nameAndValue[0];
                AlterConfigOp alter = new AlterConfigOp(new ConfigEntry(name, nameAndValue.length > 1 ? nameAndValue[1] : null),
                        AlterConfigOp.OpType.valueOf(opAndConfig[0]));
                step(operation, () -> {
                    get(admin.incrementalAlterConfigs(Map.of(resource, List.of(alter))).all());
                    emit(new Json().put("type", "config").put("after", operation).put("name", name)
                            .put("entry", configEntry(configOf(admin, resource).get(name))));
                });
            }
        }
    }

    private static void brokerConfigs(String bootstrap, String nodeId, List<String> operations) {
        TreeSet<String> names = new TreeSet<>();
        try (Admin admin = admin(bootstrap)) {
            for (String operation : operations) {
                String[] resourceAndChange = operation.split("/", 2);
                String[] opAndConfig = resourceAndChange[1].split(":", 2);
                String[] nameAndValue = opAndConfig[1].split("=", 2);
                names.add(nameAndValue[0]);
                ConfigResource resource = new ConfigResource(ConfigResource.Type.BROKER,
                        resourceAndChange[0].equals("default") ? "" : resourceAndChange[0]);
                AlterConfigOp alter = new AlterConfigOp(new ConfigEntry(nameAndValue[0], nameAndValue.length > 1 ? nameAndValue[1] : null),
                        AlterConfigOp.OpType.valueOf(opAndConfig[0]));
                step(operation, () -> get(admin.incrementalAlterConfigs(Map.of(resource, List.of(alter))).all()));
            }
            for (String name : List.of(nodeId, "")) {
                ConfigResource resource = new ConfigResource(ConfigResource.Type.BROKER, name);
                step("describe " + name, () -> {
                    Config config = get(admin.describeConfigs(List.of(resource),
                            new DescribeConfigsOptions().includeSynonyms(true)).all()).get(resource);
                    Map<String, Object> entries = new TreeMap<>();
                    for (ConfigEntry entry : config.entries()) {
                        if (names.contains(entry.name())) {
                            List<Object> synonyms = new ArrayList<>();
                            for (ConfigEntry.ConfigSynonym synonym : entry.synonyms()) {
                                synonyms.add(Arrays.asList(synonym.name(), synonym.value(), synonym.source().name()));
                            }
                            entries.put(entry.name(), new Json().put("value", entry.value())
                                    .put("source", entry.source().name()).put("read_only", entry.isReadOnly())
                                    .put("synonyms", synonyms));
                        }
                    }
                    emit(new Json().put("type", "broker_configs").put("resource", name).put("entries", entries));
                });
            }
        }
    }

    // ---- offsets -------------------------------------------------------------------------

    private static void offsets(String bootstrap, String topic, List<String> specs) {
        try (Admin admin = admin(bootstrap);
             KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, Map.of())) {
            List<TopicPartition> partitions = partitionsOf(consumer, topic);
            for (String spec : specs) {
                step("listOffsets " + spec, () -> listOffsets(admin, partitions, spec));
            }
            for (String spec : specs) {
                step("consumer " + spec, () -> consumerOffsets(consumer, partitions, spec));
            }
        }
    }

    private static void listOffsets(Admin admin, List<TopicPartition> partitions, String spec) throws Exception {
        OffsetSpec offsetSpec = switch (spec) {
            case "earliest" -> OffsetSpec.earliest();
            case "latest" -> OffsetSpec.latest();
            case "max" -> OffsetSpec.maxTimestamp();
            default -> OffsetSpec.forTimestamp(Long.parseLong(spec));
        };
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        for (TopicPartition partition : partitions) {
            request.put(partition, offsetSpec);
        }
        Map<TopicPartition, ListOffsetsResultInfo> found = get(admin.listOffsets(request).all());
        for (TopicPartition partition : partitions) {
            ListOffsetsResultInfo info = found.get(partition);
            emit(offsetLine("admin", spec, partition, info.offset(), info.timestamp())
                    .put("leader_epoch", info.leaderEpoch().orElse(null)));
        }
    }

    /** The consumer's lookups; it has none for the max timestamp. */
    private static void consumerOffsets(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> partitions, String spec) {
        if (spec.equals("earliest") || spec.equals("latest")) {
            Map<TopicPartition, Long> found = spec.equals("earliest")
                    ? consumer.beginningOffsets(partitions, LOOKUP_TIMEOUT) : consumer.endOffsets(partitions, LOOKUP_TIMEOUT);
            for (TopicPartition partition : partitions) {
                emit(offsetLine("consumer", spec, partition, found.get(partition), null));
            }
        } else if (!spec.equals("max")) {
            Map<TopicPartition, Long> query = new HashMap<>();
            for (TopicPartition partition : partitions) {
                query.put(partition, Long.parseLong(spec));
            }
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(query, LOOKUP_TIMEOUT);
            for (TopicPartition partition : partitions) {
                OffsetAndTimestamp hit = found.get(partition);  // null: no record at or after the timestamp
                emit(offsetLine("consumer", spec, partition, hit == null ? null : hit.offset(), hit == null ? null : hit.timestamp()));
            }
        }
    }

    private static Json offsetLine(String client, String spec, TopicPartition partition, Long offset, Long timestamp) {
        return new Json().put("type", "offset").put("client", client).put("spec", spec)
                .put("partition", partition.partition()).put("offset", offset).put("timestamp", timestamp);
    }

    private static void deleteRecords(String bootstrap, String topic, String positions) {
        Map<TopicPartition, RecordsToDelete> request = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
        for (String position : positions.split(",")) {
            String[] parts = position.split(":", 2);
            request.put(new TopicPartition(topic, Integer.parseInt(parts[0])), RecordsToDelete.beforeOffset(Long.parseLong(parts[1])));
        }
        try (Admin admin = admin(bootstrap)) {
            DeleteRecordsResult result = admin.deleteRecords(request);
            for (TopicPartition partition : request.keySet()) {
                step("deleteRecords " + partition.partition(), () -> emit(new Json().put("type", "deleted_records")
                        .put("partition", partition.partition())
                        .put("low_watermark", get(result.lowWatermarks().get(partition)).lowWatermark())));
            }
            step("listOffsets earliest", () -> {
                List<TopicPartition> partitions = new ArrayList<>();
                for (TopicPartitionInfo info : get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic).partitions()) {
                    partitions.add(new TopicPartition(topic, info.partition()));
                }
                listOffsets(admin, partitions, "earliest");
            });
        }
    }

    // ---- producer ------------------------------------------------------------------------

    private static void produce(String bootstrap, String topic, String compression, Map<String, String> options) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "2000000");
        props.putAll(options);
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
                if (!line.isEmpty()) {
                    send(producer, topic, line.split("\t", -1), count++, failures);
                }
            }
            producer.flush();
        }
        emit(new Json().put("type", "produced").put("count", count).put("errors", failures.get())
                .put("elapsed_ms", (System.nanoTime() - started) / 1_000_000));
    }

    private static void send(KafkaProducer<byte[], byte[]> producer, String topic, String[] fields, int index, AtomicInteger failures) {
        RecordHeaders headers = new RecordHeaders();
        if (fields.length > 2 && !fields[2].isEmpty()) {
            for (String header : fields[2].split(",")) {
                String[] parts = header.split(":", 2);
                headers.add(new String(unhex(parts[0]), StandardCharsets.UTF_8), unhex(parts[1]));
            }
        }
        Integer partition = fields.length > 3 && !fields[3].equals("-") ? Integer.valueOf(fields[3]) : null;
        Long timestamp = fields.length > 4 && !fields[4].equals("-") ? Long.valueOf(fields[4]) : null;
        producer.send(new ProducerRecord<>(topic, partition, timestamp, unhex(fields[0]), unhex(fields[1]), headers), (metadata, error) -> {
            if (error != null) {
                failures.incrementAndGet();
                emit(new Json().put("type", "send_error").put("index", index)
                        .put("error", error.getClass().getSimpleName()).put("message", String.valueOf(error.getMessage())));
            } else {
                emit(new Json().put("type", "ack").put("index", index).put("partition", metadata.partition())
                        .put("offset", metadata.offset()).put("timestamp", metadata.timestamp()));
            }
        });
    }

    /**
     * Transactions by a plan such as "commit:100,abort:50": each step one transaction of that many
     * records (value "s{step}-{i}", round robin over the partitions), flushed, then committed or aborted.
     * With offsets-group=G each transaction also commits G's offset of partition 0 to the step's
     * number through sendOffsetsToTransaction.
     */
    private static void transact(String bootstrap, String topic, String transactionalId, String plan,
                                 Map<String, String> options) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        String group = options.get("offsets-group");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            int partitions = producer.partitionsFor(topic).size();
            String[] steps = plan.split(",");
            for (int step = 0; step < steps.length; step++) {
                String[] parts = steps[step].split(":", 2);
                int count = Integer.parseInt(parts[1]);
                producer.beginTransaction();
                for (int i = 0; i < count; i++) {
                    byte[] value = ("s" + step + "-" + i).getBytes(StandardCharsets.US_ASCII);
                    producer.send(new ProducerRecord<>(topic, i % partitions, null, value));
                }
                if (group != null) {
                    producer.sendOffsetsToTransaction(
                            Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(step + 1)),
                            new ConsumerGroupMetadata(group));
                }
                producer.flush();
                if (parts[0].equals("commit")) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                emit(new Json().put("type", "transaction").put("step", step).put("outcome", parts[0]).put("count", count));
            }
        }
    }

    // ---- consumer ------------------------------------------------------------------------

    private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, Map<String, String> settings) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        props.putAll(settings);
        return new KafkaConsumer<>(props);
    }

    private static List<TopicPartition> partitionsOf(KafkaConsumer<byte[], byte[]> consumer, String topic) {
        List<TopicPartition> partitions = new ArrayList<>();
        for (PartitionInfo info : consumer.partitionsFor(topic, LOOKUP_TIMEOUT)) {
            partitions.add(new TopicPartition(topic, info.partition()));
        }
        partitions.sort(Comparator.comparingInt(TopicPartition::partition));
        return partitions;
    }

    private static void consume(String bootstrap, String topic, int count, Map<String, String> options) {
        Map<String, String> settings = new HashMap<>();
        if (options.containsKey("isolation")) {
            settings.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, options.get("isolation"));
        }
        if (options.containsKey("reset")) {
            settings.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, options.get("reset"));
        }
        if (options.containsKey("group")) {
            groupConsume(bootstrap, topic, count, options, settings);
            return;
        }
        long started = System.nanoTime();
        int received;
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, settings)) {
            List<TopicPartition> partitions = partitionsOf(consumer, topic);
            if (options.containsKey("partitions")) {
                List<String> wanted = Arrays.asList(options.get("partitions").split(","));
                partitions.removeIf(partition -> !wanted.contains(String.valueOf(partition.partition())));
            }
            consumer.assign(partitions);
            if (options.containsKey("seeks")) {  // partitions not listed keep no position: the reset policy decides
                for (String seek : options.get("seeks").split(",")) {
                    String[] parts = seek.split(":", 2);
                    consumer.seek(new TopicPartition(topic, Integer.parseInt(parts[0])), Long.parseLong(parts[1]));
                }
            } else if (!partitions.isEmpty()) {  // an empty collection would mean every assigned partition
                consumer.seekToBeginning(partitions);
            }
            received = pollUntil(consumer, count);
        }
        emit(new Json().put("type", "consumed").put("count", received)
                .put("elapsed_ms", (System.nanoTime() - started) / 1_000_000));
    }

    /** subscribe() in a group (group.protocol classic or consumer), read count records, commit, report. */
    private static void groupConsume(String bootstrap, String topic, int count, Map<String, String> options,
                                     Map<String, String> settings) {
        settings.put(ConsumerConfig.GROUP_ID_CONFIG, options.get("group"));
        settings.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, options.getOrDefault("protocol", "classic"));
        settings.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, options.getOrDefault("reset", "earliest"));
        long started = System.nanoTime();
        int received;
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, settings)) {
            consumer.subscribe(List.of(topic));
            received = pollUntil(consumer, count);
            consumer.commitSync(Duration.ofSeconds(15));
            Map<String, Long> committed = new TreeMap<>();
            consumer.committed(consumer.assignment(), Duration.ofSeconds(15)).forEach((partition, offset) ->
                    committed.put(String.valueOf(partition.partition()), offset == null ? null : offset.offset()));
            emit(new Json().put("type", "committed").put("offsets", committed)
                    .put("assignment", new TreeSet<>(consumer.assignment().stream().map(TopicPartition::partition).toList())));
        }
        emit(new Json().put("type", "consumed").put("count", received)
                .put("elapsed_ms", (System.nanoTime() - started) / 1_000_000));
    }

    /** Polls until count records or the time limit, then once more: more than asked for is a failure too. */
    private static int pollUntil(KafkaConsumer<byte[], byte[]> consumer, int count) {
        int received = 0;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CONSUME_TIMEOUT_MS);
        try {
            while (received < count && System.nanoTime() < deadline) {
                received += emitRecords(consumer.poll(Duration.ofMillis(200)));
            }
            received += emitRecords(consumer.poll(Duration.ofMillis(EXTRA_POLL_MS)));
        } catch (InvalidOffsetException error) {  // no position and reset=none, or out of range and reset=none
            Map<String, Long> offsets = new TreeMap<>();
            if (error instanceof OffsetOutOfRangeException outOfRange) {
                outOfRange.offsetOutOfRangePartitions()
                        .forEach((partition, offset) -> offsets.put(String.valueOf(partition.partition()), offset));
            }
            emit(new Json().put("type", "poll_error").put("error", error.getClass().getSimpleName())
                    .put("partitions", new TreeSet<>(error.partitions().stream().map(TopicPartition::partition).toList()))
                    .put("offsets", offsets));
        }
        return received;
    }

    private static int emitRecords(Iterable<ConsumerRecord<byte[], byte[]>> records) {
        int emitted = 0;
        for (ConsumerRecord<byte[], byte[]> record : records) {
            emitted++;
            List<Object> headers = new ArrayList<>();
            for (Header header : record.headers()) {
                headers.add(Arrays.asList(header.key(), hexOrNull(header.value())));
            }
            emit(new Json().put("type", "record").put("partition", record.partition()).put("offset", record.offset())
                    .put("timestamp", record.timestamp()).put("timestamp_type", record.timestampType().name())
                    .put("key", hexOrNull(record.key())).put("value", hexOrNull(record.value())).put("headers", headers));
        }
        return emitted;
    }

    // ---- share consumer (KIP-932) --------------------------------------------------------

    private static KafkaShareConsumer<byte[], byte[]> shareConsumer(String bootstrap, String group) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props);
        consumer.subscribe(List.of(group));  // the topic is named as its group
        return consumer;
    }

    /** One plan of the share command: <group>:<consumers>:<deliveries>:<rule>,... */
    private static void share(String bootstrap, String plan) {
        String[] parts = plan.split(":", 4);
        String group = parts[0];
        int consumerCount = Integer.parseInt(parts[1]);
        int deliveries = Integer.parseInt(parts[2]);
        List<String> rules = parts.length > 3 && !parts[3].isEmpty() ? List.of(parts[3].split(",")) : List.of();
        List<KafkaShareConsumer<byte[], byte[]>> consumers = new ArrayList<>();
        long started = System.nanoTime();
        int received = 0;
        try {
            for (int i = 0; i < consumerCount; i++) {
                consumers.add(shareConsumer(bootstrap, group));
            }
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(SHARE_TIMEOUT_MS);
            while (received < deliveries && System.nanoTime() < deadline) {
                received += shareRound(consumers, group, rules, started);
            }
            long quietEnd = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(SHARE_QUIET_MS);
            while (System.nanoTime() < quietEnd) {
                received += shareRound(consumers, group, rules, started);
            }
        } finally {
            consumers.forEach(KafkaShareConsumer::close);
        }
        emit(new Json().put("type", "shared").put("group", group).put("deliveries", received)
                .put("elapsed_ms", (System.nanoTime() - started) / 1_000_000));
    }

    /** Polls each consumer once, acknowledges what it got by the rules and commits: the records received. */
    private static int shareRound(List<KafkaShareConsumer<byte[], byte[]>> consumers, String group, List<String> rules,
                                  long started) {
        int received = 0;
        for (int index = 0; index < consumers.size(); index++) {
            KafkaShareConsumer<byte[], byte[]> consumer = consumers.get(index);
            ConsumerRecords<byte[], byte[]> records = consumer.poll(SHARE_POLL);
            for (ConsumerRecord<byte[], byte[]> record : records) {
                AcknowledgeType type = acknowledgement(rules, record);
                consumer.acknowledge(record, type);
                emit(shareRecord(record, started).put("group", group).put("consumer", index)
                        .put("acknowledged", type.name()));
            }
            if (!records.isEmpty()) {
                Map<String, Object> errors = new TreeMap<>();
                consumer.commitSync(LOOKUP_TIMEOUT).forEach((partition, error) -> error.ifPresent(failure ->
                        errors.put(String.valueOf(partition.partition()), failure.getClass().getSimpleName())));
                emit(new Json().put("type", "share_commit").put("group", group).put("consumer", index)
                        .put("at_ms", (System.nanoTime() - started) / 1_000_000).put("errors", errors));
            }
            received += records.count();
        }
        return received;
    }

    /** The first rule matching the record (<offset>[@<delivery count>]=<type> or *=<type>), else ACCEPT. */
    private static AcknowledgeType acknowledgement(List<String> rules, ConsumerRecord<byte[], byte[]> record) {
        String offset = String.valueOf(record.offset());
        String delivered = offset + "@" + record.deliveryCount().orElse((short) 0);
        for (String rule : rules) {
            String[] matchAndType = rule.split("=", 2);
            String match = matchAndType[0];
            if (match.equals("*") || match.equals(offset) || match.equals(delivered)) {
                return AcknowledgeType.valueOf(matchAndType[1]);
            }
        }
        return AcknowledgeType.ACCEPT;
    }

    private static Json shareRecord(ConsumerRecord<byte[], byte[]> record, long started) {
        return new Json().put("type", "share_record").put("partition", record.partition())
                .put("offset", record.offset()).put("delivery_count", record.deliveryCount().orElse(null))
                .put("value", hexOrNull(record.value()))
                .put("at_ms", (System.nanoTime() - started) / 1_000_000);
    }

    /** Takes the first records that come and holds them, acknowledging nothing, until killed. */
    private static void shareHold(String bootstrap, String group) throws InterruptedException {
        long started = System.nanoTime();
        try (KafkaShareConsumer<byte[], byte[]> consumer = shareConsumer(bootstrap, group)) {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(SHARE_TIMEOUT_MS);
            ConsumerRecords<byte[], byte[]> records = ConsumerRecords.empty();
            while (records.isEmpty() && System.nanoTime() < deadline) {
                records = consumer.poll(SHARE_POLL);
            }
            for (ConsumerRecord<byte[], byte[]> record : records) {
                emit(shareRecord(record, started).put("group", group));
            }
            emit(new Json().put("type", "holding").put("group", group).put("count", records.count()));
            System.out.flush();
            Thread.sleep(SHARE_HOLD_MS);  // polling again would need them acknowledged first
        }
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
        private final Map<String, Object> fields = new LinkedHashMap<>();

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
