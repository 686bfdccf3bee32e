// Kafka's Java client (kafka-clients 4.4.0) through kbroker's faults on demand, for
// compat_tests/test_faults_java.py, which sets each fault on a broker in its own process and reads what the
// client did from this program's output. Compiled at test time by testkit/streams_apps.py with the jars of the
// pom's `streams` profile (which carries kafka-clients 4.4.0).
//
// Command line: bootstrap.servers=HOST:PORT. One JVM plays many scenarios (a JVM costs a second or more to
// start): standard input gives one a line, "RUN NAME ARG ...", played in turn. At a step the scenario waits for
// the test to set its fault and answer "go" (or "abort"); standard input closed ends the program.
//
// Output: one JSON object per line on stdout, each with "event", "run" (the RUN it belongs to) and "at_ms":
//   step        {"step"}: waiting for the test's go
//   assigned, revoked, lost  {"partitions"}: a ConsumerRebalanceListener call
//   delivered   {"offset"} or {"error"}: a producer callback
//   done        {...}: what the scenario saw, by name
//   failed      {"chain"}: the scenario threw; the exception and its causes, each [class name, message]
// Every wait is bounded: the clients' own timeouts, POLL_TIMEOUT for a loop of polls, STEP_TIMEOUT for a go.

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

final class FaultsClient {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);  // one client call
    private static final long POLL_TIMEOUT_MS = 30_000;  // a loop of polls waiting for an assignment or records
    private static final long STEP_TIMEOUT_MS = 60_000;  // the test's answer at a step
    private static final Duration POLL = Duration.ofMillis(100);
    private static final String END_OF_INPUT = "\u0000end";
    private static final String CONNECTIONS = "connection-creation-total";  // a client's metric: connections made

    private final String bootstrap;
    private final BlockingQueue<String> input = new LinkedBlockingQueue<>();
    private volatile String run = "";

    private FaultsClient(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        for (String arg : args) {
            if (arg.startsWith("bootstrap.servers=")) {
                bootstrap = arg.substring("bootstrap.servers=".length());
            }
        }
        if (bootstrap == null) {
            throw new IllegalArgumentException("usage: FaultsClient bootstrap.servers=HOST:PORT");
        }
        new FaultsClient(bootstrap).serve();
        System.exit(0);  // the clients' threads are closed; the reader thread is a daemon, but be sure
    }

    private void serve() throws InterruptedException {
        Thread reader = new Thread(this::readInput, "stdin");
        reader.setDaemon(true);
        reader.start();
        while (true) {
            String line = input.take();
            if (line.equals(END_OF_INPUT)) {
                return;
            }
            String[] words = line.trim().split("\\s+");
            if (words.length < 2) {
                continue;  // a stray "go": no scenario waits for it
            }
            run = words[0];
            try {
                play(words[1], List.of(words).subList(2, words.length));
            } catch (Exception failure) {
                emit("failed", "chain", chain(failure));
            }
        }
    }

    private void readInput() {
        try (BufferedReader lines = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            for (String line = lines.readLine(); line != null; line = lines.readLine()) {
                input.add(line);
            }
        } catch (IOException ignored) {
            // as at the end of input
        }
        input.add(END_OF_INPUT);
    }

    private void play(String scenario, List<String> args) throws Exception {
        switch (scenario) {
            case "produce" -> produce(args.get(0), Boolean.parseBoolean(args.get(1)));
            case "rebalance" -> rebalance(args.get(0), args.get(1));
            case "fenced" -> fenced(args.get(0), args.get(1));
            case "disk-full" -> diskFull(args.get(0));
            case "reconnect" -> reconnect(args.get(0));
            case "coordinator-moved" -> coordinatorMoved(args.get(0), args.get(1));
            case "unavailable" -> unavailable(args.get(0));
            case "session-expired" -> sessionExpired(args.get(0), args.get(1), Integer.parseInt(args.get(2)),
                                                     Integer.parseInt(args.get(3)));
            default -> throw new IllegalArgumentException("no scenario " + scenario);
        }
    }

    // -- the scenarios -------------------------------------------------------------------------------------

    /** One record sent with the default retries; the test refused its first Produce requests. */
    private void produce(String topic, boolean idempotent) throws Exception {
        Properties settings = producerSettings();
        settings.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, idempotent);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(settings)) {
            RecordMetadata written = sent(producer, topic, "once");
            emit("done", "offset", written.offset(), "retries", metric(producer.metrics(), "record-retry-total"),
                 "errors", metric(producer.metrics(), "record-error-total"));
        }
    }

    /** A classic member, assigned, then the group rebalanced by the test. */
    private void rebalance(String topic, String group) throws Exception {
        Properties settings = consumerSettings(group);
        settings.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 200);  // hears the rebalance within 0.2 s
        List<Object> events = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(settings)) {
            consumer.subscribe(List.of(topic), listener(events));
            pollUntil(consumer, () -> !events.isEmpty(), "the first assignment");
            int generation = consumer.groupMetadata().generationId();
            String member = consumer.groupMetadata().memberId();
            step("assigned");  // the test rebalances the group
            events.clear();
            pollUntil(consumer, () -> hasEvent(events, "assigned"), "the assignment after the rebalance");
            emit("done", "events", events, "generation_before", generation,
                 "generation_after", consumer.groupMetadata().generationId(),
                 "same_member", member.equals(consumer.groupMetadata().memberId()));
        }
    }

    /** A transaction with one record, fenced by the test before its commit; then what read_committed reads. */
    private void fenced(String topic, String transactionalId) throws Exception {
        Properties settings = producerSettings();
        settings.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        List<Object> commitError = null;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(settings)) {
            producer.initTransactions();
            producer.beginTransaction();
            sent(producer, topic, "fenced");
            step("in-transaction");  // the test fences the producer
            try {
                producer.commitTransaction();
            } catch (Exception refused) {
                commitError = chain(refused);
            }
        }
        step("commit-refused");  // the test waits for the abort's markers
        Properties reading = consumerSettings(null);
        reading.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(reading)) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition), TIMEOUT).get(partition);  // the last stable offset
            List<String> read = new ArrayList<>();
            pollUntil(consumer, read, () -> consumer.position(partition, TIMEOUT) >= end, "the end of the partition");
            emit("done", "commit_error", commitError, "read", read, "end", end,
                 "position", consumer.position(partition, TIMEOUT));
        }
    }

    /** A producer without retries against a full disk, then after the test freed it. */
    private void diskFull(String topic) throws Exception {
        Properties settings = producerSettings();
        settings.put(ProducerConfig.RETRIES_CONFIG, 0);
        settings.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false);  // idempotence needs retries
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(settings)) {
            CompletableFuture<Exception> callback = new CompletableFuture<>();
            producer.send(new ProducerRecord<>(topic, 0, null, "refused"),
                          (metadata, exception) -> callback.complete(exception));
            Exception refused = callback.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            step("refused");  // the test frees the disk
            RecordMetadata taken = sent(producer, topic, "taken");
            emit("done", "callback_error", refused == null ? null : chain(refused), "offset", taken.offset());
        }
    }

    /** A producer and a consumer (assigned, no group) whose connections the test closes between two records. */
    private void reconnect(String topic) throws Exception {
        TopicPartition partition = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerSettings());
             KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerSettings(null))) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            List<String> read = new ArrayList<>();
            sent(producer, topic, "first");
            pollUntil(consumer, read, () -> read.size() >= 1, "the first record");
            double producerBefore = metric(producer.metrics(), CONNECTIONS);
            double consumerBefore = metric(consumer.metrics(), CONNECTIONS);
            step("connected");  // the test closes every connection
            RecordMetadata second = sent(producer, topic, "second");
            pollUntil(consumer, read, () -> read.size() >= 2, "the second record");
            emit("done", "read", read, "second_offset", second.offset(),
                 "producer_connections", List.of(producerBefore, metric(producer.metrics(), CONNECTIONS)),
                 "consumer_connections", List.of(consumerBefore, metric(consumer.metrics(), CONNECTIONS)));
        }
    }

    /** A classic member that read a record commits it after the test moved its group's coordinator. */
    private void coordinatorMoved(String topic, String group) throws Exception {
        Properties settings = consumerSettings(group);
        settings.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerSettings());
             KafkaConsumer<String, String> consumer = new KafkaConsumer<>(settings)) {
            sent(producer, topic, "committed");
            consumer.subscribe(List.of(topic));
            List<String> read = new ArrayList<>();
            pollUntil(consumer, read, () -> !read.isEmpty(), "the record");
            TopicPartition partition = new TopicPartition(topic, 0);
            long next = consumer.position(partition, TIMEOUT);
            step("read");  // the test moves the coordinator
            consumer.commitSync(Map.of(partition, new OffsetAndMetadata(next)), TIMEOUT);
            OffsetAndMetadata committed = consumer.committed(Set.of(partition), TIMEOUT).get(partition);
            emit("done", "committed", committed == null ? null : committed.offset());
        }
    }

    /** One record sent to a partition the test made leaderless, delivered once the test clears it. */
    private void unavailable(String topic) throws Exception {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerSettings())) {
            long started = System.nanoTime();
            CompletableFuture<RecordMetadata> delivered = new CompletableFuture<>();
            producer.send(new ProducerRecord<>(topic, 0, null, "waited"), (metadata, exception) -> {
                if (exception != null) {
                    emit("delivered", "error", chain(exception));
                    delivered.completeExceptionally(exception);
                } else {
                    emit("delivered", "offset", metadata.offset());
                    delivered.complete(metadata);
                }
            });
            step("sent");  // the test sees the client asking for a leader, then clears the fault
            RecordMetadata written = delivered.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            emit("done", "offset", written.offset(), "waited_ms", (System.nanoTime() - started) / 1_000_000);
        }
    }

    /** A classic member with a long session and a slow heartbeat, whose session the test runs out on the
     * broker's clock; the member hears it at its next heartbeat. */
    private void sessionExpired(String topic, String group, int sessionMs, int heartbeatMs) throws Exception {
        Properties settings = consumerSettings(group);
        settings.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionMs);
        settings.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, heartbeatMs);
        List<Object> events = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(settings)) {
            consumer.subscribe(List.of(topic), listener(events));
            pollUntil(consumer, () -> !events.isEmpty(), "the first assignment");
            String member = consumer.groupMetadata().memberId();
            step("assigned");  // the test moves the broker's clock past the session
            events.clear();
            pollUntil(consumer, () -> hasEvent(events, "assigned"), "the assignment after the session ran out");
            emit("done", "events", events, "member_before", member,
                 "member_after", consumer.groupMetadata().memberId());
        }
    }

    // -- the clients ---------------------------------------------------------------------------------------

    private Properties producerSettings() {
        Properties settings = new Properties();
        settings.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        settings.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        settings.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        settings.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, (int) TIMEOUT.toMillis());
        settings.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        settings.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 25_000);  // at least linger.ms + request.timeout.ms
        settings.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 50);
        return settings;
    }

    /** A classic consumer (group.protocol=classic) of {@code group}, or one without a group (null). */
    private Properties consumerSettings(String group) {
        Properties settings = new Properties();
        settings.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        settings.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        settings.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        settings.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        settings.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) TIMEOUT.toMillis());
        settings.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        settings.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 100);
        settings.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, 50);
        if (group != null) {
            settings.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            settings.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        }
        return settings;
    }

    /** A listener that prints each call and keeps it in {@code events} as [kind, [partition, ...]]. */
    private ConsumerRebalanceListener listener(List<Object> events) {
        return new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                heard("revoked", partitions);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                heard("assigned", partitions);
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                heard("lost", partitions);
            }

            private void heard(String kind, Collection<TopicPartition> partitions) {
                List<Integer> numbers = partitions.stream().map(TopicPartition::partition).sorted().toList();
                events.add(List.of(kind, numbers));
                emit(kind, "partitions", numbers);
            }
        };
    }

    /** One record sent to {@code topic}'s partition 0, once the producer has its answer. */
    private static RecordMetadata sent(KafkaProducer<String, String> producer, String topic, String value)
            throws Exception {
        ProducerRecord<String, String> record = new ProducerRecord<>(topic, 0, null, value);
        return producer.send(record).get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    }

    private static boolean hasEvent(List<Object> events, String kind) {
        return events.stream().anyMatch(event -> ((List<?>) event).get(0).equals(kind));
    }

    private static void pollUntil(KafkaConsumer<String, String> consumer, BooleanSupplier done, String what) {
        pollUntil(consumer, new ArrayList<>(), done, what);
    }

    /** Poll (the listener's calls happen in poll) until {@code done}; the values read meanwhile go to {@code read}. */
    private static void pollUntil(KafkaConsumer<String, String> consumer, List<String> read, BooleanSupplier done,
                                  String what) {
        long deadline = System.nanoTime() + POLL_TIMEOUT_MS * 1_000_000;
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(what + ": not within " + POLL_TIMEOUT_MS + " ms");
            }
            for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                read.add(record.value());
            }
        }
    }

    /** A client's metric by name (e.g. record-retry-total), as a number; NaN when it has none such. */
    private static double metric(Map<MetricName, ? extends Metric> metrics, String name) {
        for (Map.Entry<MetricName, ? extends Metric> entry : metrics.entrySet()) {
            MetricName key = entry.getKey();
            if (key.name().equals(name) && key.group().endsWith("-metrics") && key.tags().size() == 1) {
                return ((Number) entry.getValue().metricValue()).doubleValue();
            }
        }
        return Double.NaN;
    }

    // -- the test's side -----------------------------------------------------------------------------------

    /** Print the step and wait for the test's answer: "go" goes on, anything else (or no answer) fails. */
    private void step(String name) throws InterruptedException {
        emit("step", "step", name);
        String answer = input.poll(STEP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        if (answer == null || !answer.trim().equals("go")) {
            if (END_OF_INPUT.equals(answer)) {
                input.add(END_OF_INPUT);  // for the main loop too
            }
            throw new IllegalStateException("step " + name + ": the test answered " + answer);
        }
    }

    private static List<Object> chain(Throwable thrown) {
        List<Object> links = new ArrayList<>();
        for (Throwable link = thrown; link != null && links.size() < 8; link = link.getCause()) {
            links.add(List.of(link.getClass().getName(), String.valueOf(link.getMessage())));
        }
        return links;
    }

    /** One output line: {"event": event, "run": run, "at_ms": now, key: value, ...}. */
    private void emit(String event, Object... keysAndValues) {
        StringBuilder line = new StringBuilder("{\"event\":").append(quote(event))
                .append(",\"run\":").append(quote(run)).append(",\"at_ms\":").append(System.currentTimeMillis());
        for (int i = 0; i + 1 < keysAndValues.length; i += 2) {
            line.append(',').append(quote(String.valueOf(keysAndValues[i]))).append(':');
            appendValue(line, keysAndValues[i + 1]);
        }
        line.append('}');
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    private static void appendValue(StringBuilder line, Object value) {
        if (value == null) {
            line.append("null");
        } else if (value instanceof Double number && number.isNaN()) {
            line.append("null");
        } else if (value instanceof Number || value instanceof Boolean) {
            line.append(value);
        } else if (value instanceof Collection<?> items) {
            line.append('[');
            String separator = "";
            for (Object item : items) {
                line.append(separator);
                appendValue(line, item);
                separator = ",";
            }
            line.append(']');
        } else {
            line.append(quote(value.toString()));
        }
    }

    private static String quote(String text) {
        StringBuilder quoted = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> quoted.append("\\\"");
                case '\\' -> quoted.append("\\\\");
                case '\n' -> quoted.append("\\n");
                case '\r' -> quoted.append("\\r");
                case '\t' -> quoted.append("\\t");
                default -> {
                    if (c < 0x20) {
                        quoted.append(String.format("\\u%04x", (int) c));
                    } else {
                        quoted.append(c);
                    }
                }
            }
        }
        return quoted.append('"').toString();
    }
}
