package example;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Tests of a Java service's Kafka code against a kbroker test broker. One broker serves the class
 * (started by {@code kbroker test-broker}, or {@code $KBROKER test-broker}); each test begins on an empty
 * broker with no faults. The control API is described in kbroker's docs/test-broker.md.
 */
class OrdersTest {
    static final Duration TIMEOUT = Duration.ofSeconds(30);
    static TestBroker broker;

    @BeforeAll
    static void startBroker() throws Exception {
        broker = TestBroker.start();
    }

    @AfterAll
    static void stopBroker() {
        if (broker != null) {
            broker.close();
        }
    }

    @BeforeEach
    void emptyBroker() throws Exception {
        broker.post("/faults/clear", Map.of());
        broker.post("/reset", Map.of());
    }

    @Test
    void producerRetriesNotLeaderOrFollowerThenSucceeds() throws Exception {
        createTopic("orders");
        // The next two Produce requests for "orders" are refused as if the leader had just moved.
        broker.post("/faults/fail", Map.of("api", "Produce", "error", "NOT_LEADER_OR_FOLLOWER", "count", 2,
                                           "topic", "orders"));

        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig())) {
            RecordMetadata sent = producer.send(new ProducerRecord<>("orders", "order-1", "42 apples"))
                .get(TIMEOUT.toSeconds(), SECONDS);
            double retries = metric(producer.metrics(), "producer-metrics", "record-retry-total");
            assertTrue(retries >= 2, "the producer retried " + retries + " times, not the 2 refusals'");

            JsonNode records = broker.get("/topics/" + TestBroker.path("orders") + "/records").get("records");
            assertEquals(1, records.size(), records.toString());
            assertEquals("42 apples", TestBroker.text(records.get(0).get("value")));
            assertEquals(sent.offset(), records.get(0).get("offset").asLong());
        }
    }

    @Test
    void clientsReconnectAfterTheBrokerClosesTheirConnections() throws Exception {
        createTopic("payments");
        TopicPartition partition = new TopicPartition("payments", 0);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig());
             KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfig())) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            producer.send(new ProducerRecord<>("payments", "first")).get(TIMEOUT.toSeconds(), SECONDS);
            expectValue(consumer, "first");
            double producerConnections = metric(producer.metrics(), "producer-metrics", "connection-creation-total");
            double consumerConnections = metric(consumer.metrics(), "consumer-metrics", "connection-creation-total");

            int closed = broker.post("/faults/close-connections", Map.of()).get("closed").asInt();
            assertTrue(closed >= 2, "the broker closed " + closed + " connections, not the producer's and the consumer's");

            producer.send(new ProducerRecord<>("payments", "second")).get(TIMEOUT.toSeconds(), SECONDS);
            expectValue(consumer, "second");
            assertTrue(metric(producer.metrics(), "producer-metrics", "connection-creation-total") > producerConnections,
                       "the producer went on without connecting again");
            assertTrue(metric(consumer.metrics(), "consumer-metrics", "connection-creation-total") > consumerConnections,
                       "the consumer went on without connecting again");
        }
    }

    @Test
    void resetLeavesAnEmptyBroker() throws Exception {
        createTopic("leftovers");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig())) {
            producer.send(new ProducerRecord<>("leftovers", "from an earlier test")).get(TIMEOUT.toSeconds(), SECONDS);
        }

        broker.post("/reset", Map.of());
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", broker.bootstrap))) {
            assertFalse(admin.listTopics().names().get(TIMEOUT.toSeconds(), SECONDS).contains("leftovers"));
        }
    }

    // --- the client side -------------------------------------------------------------------------------

    static Properties producerConfig() {
        Properties config = new Properties();
        config.put("bootstrap.servers", broker.bootstrap);
        config.put("key.serializer", StringSerializer.class.getName());
        config.put("value.serializer", StringSerializer.class.getName());
        return config;
    }

    static Properties consumerConfig() {
        Properties config = new Properties();
        config.put("bootstrap.servers", broker.bootstrap);
        config.put("key.deserializer", StringDeserializer.class.getName());
        config.put("value.deserializer", StringDeserializer.class.getName());
        config.put("fetch.max.wait.ms", 200);
        return config;
    }

    static void createTopic(String name) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", broker.bootstrap))) {
            admin.createTopics(List.of(new NewTopic(name, 1, (short) 1))).all().get(TIMEOUT.toSeconds(), SECONDS);
        }
    }

    /** Polls until a record with {@code value} arrives, for at most TIMEOUT. */
    static void expectValue(KafkaConsumer<String, String> consumer, String value) {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                if (value.equals(record.value())) {
                    return;
                }
            }
        }
        fail("no record " + value + " within " + TIMEOUT);
    }

    static double metric(Map<MetricName, ? extends Metric> metrics, String group, String name) {
        return metrics.entrySet().stream()
            .filter(entry -> entry.getKey().group().equals(group) && entry.getKey().name().equals(name))
            .mapToDouble(entry -> ((Number) entry.getValue().metricValue()).doubleValue())
            .findFirst()
            .orElseThrow(() -> new AssertionError("the client has no metric " + group + "/" + name));
    }

    // --- the test broker: `kbroker test-broker` and its control API ---------------------------------------

    /** A test broker in a process of its own, stopped by {@link #close} (or by this JVM's end). */
    static final class TestBroker implements AutoCloseable {
        static final ObjectMapper JSON = new ObjectMapper();
        final Process process;
        final String bootstrap;
        final String control;
        final HttpClient http = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(TIMEOUT)
            .build();

        private TestBroker(Process process, JsonNode line) {
            this.process = process;
            this.bootstrap = line.get("bootstrap").asText();
            this.control = line.get("control").asText();
        }

        static TestBroker start() throws Exception {
            String executable = System.getenv().getOrDefault("KBROKER", "kbroker");
            Process process = new ProcessBuilder(executable, "test-broker")
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
            BufferedReader output = new BufferedReader(new InputStreamReader(process.getInputStream(), UTF_8));
            CompletableFuture<String> firstLine = CompletableFuture.supplyAsync(() -> {
                try {
                    return output.readLine();
                } catch (IOException error) {
                    throw new UncheckedIOException(error);
                }
            });
            try {
                String line = firstLine.get(TIMEOUT.toSeconds(), SECONDS);
                if (line == null) {
                    throw new IllegalStateException("the test broker exited: " + process.waitFor());
                }
                return new TestBroker(process, JSON.readTree(line));
            } catch (TimeoutException | RuntimeException error) {
                process.destroyForcibly();
                throw error;
            }
        }

        JsonNode get(String path) throws Exception {
            return send(HttpRequest.newBuilder(URI.create(control + path)).GET());
        }

        JsonNode post(String path, Map<String, ?> body) throws Exception {
            String json = JSON.writeValueAsString(body);
            return send(HttpRequest.newBuilder(URI.create(control + path))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json)));
        }

        private JsonNode send(HttpRequest.Builder request) throws Exception {
            HttpResponse<String> response = http.send(request.timeout(TIMEOUT).build(),
                                                       HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 200) {
                throw new AssertionError(response.request().method() + " " + response.uri().getPath() + ": "
                                         + response.statusCode() + " " + response.body());
            }
            return JSON.readTree(response.body());
        }

        /** A key, value or header value of GET /topics/{topic}/records: base64, or null. */
        static String text(JsonNode base64) {
            return base64.isNull() ? null : new String(Base64.getDecoder().decode(base64.asText()), UTF_8);
        }

        static String path(String name) {
            return URLEncoder.encode(name, UTF_8).replace("+", "%20");
        }

        @Override
        public void close() {
            process.destroy(); // SIGTERM: the broker stops cleanly
            try {
                if (!process.waitFor(TIMEOUT.toSeconds(), SECONDS)) {
                    process.destroyForcibly();
                }
            } catch (InterruptedException error) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }
}
