// Confluent's Java Avro serializer and deserializer (kafka-avro-serializer with
// kafka-schema-registry-client) against a broker that serves the schema registry itself.
//
// Compiled at test time by compat_tests/java_jars.py; every result is one JSON object per line
// on stdout, for the Python test to parse.
//
//   java SchemaCompat produce <bootstrap> <registry url> <topic> <count>
//   java SchemaCompat consume <bootstrap> <registry url> <topic> <count>
//
// `produce` sends <count> GenericRecords of kbroker.test.Reading (sensor: string, value: double,
// seen: long, note: null or string) to partition 0, the serializer registering the schema under
// <topic>-value, and reports each record's offset and the schema id it was written with.
// `consume` reads <count> records of partition 0 from the beginning as raw bytes, decodes each with
// KafkaAvroDeserializer (the writer's schema fetched from the registry by id), and reports the
// schema id from the record's own header, the writer schema's full name and the decoded fields.

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.confluent.kafka.serializers.KafkaAvroDeserializer;
import io.confluent.kafka.serializers.KafkaAvroSerializer;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SchemaCompat {
    static final String READING = "{\"type\": \"record\", \"name\": \"Reading\", \"namespace\": \"kbroker.test\", \"fields\": ["
            + "{\"name\": \"sensor\", \"type\": \"string\"}, {\"name\": \"value\", \"type\": \"double\"},"
            + "{\"name\": \"seen\", \"type\": \"long\"}, {\"name\": \"note\", \"type\": [\"null\", \"string\"], \"default\": null}]}";
    static final long POLL_LIMIT_MS = 30_000;
    static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        try {
            switch (args[0]) {
                case "produce" -> produce(args[1], args[2], args[3], Integer.parseInt(args[4]));
                case "consume" -> consume(args[1], args[2], args[3], Integer.parseInt(args[4]));
                default -> throw new IllegalArgumentException("unknown command " + args[0]);
            }
        } catch (Exception error) {
            emit(Map.of("type", "error", "class", error.getClass().getName(), "message", String.valueOf(error.getMessage())));
            System.exit(1);
        }
    }

    static void produce(String bootstrap, String registry, String topic, int count) throws Exception {
        Properties settings = new Properties();
        settings.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        settings.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        settings.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, KafkaAvroSerializer.class.getName());
        settings.put("schema.registry.url", registry);
        settings.put("auto.register.schemas", "true");
        Schema schema = new Schema.Parser().parse(READING);
        try (KafkaProducer<String, Object> producer = new KafkaProducer<>(settings)) {
            for (int i = 0; i < count; i++) {
                GenericRecord reading = new GenericData.Record(schema);
                reading.put("sensor", "sensor-" + i);
                reading.put("value", i * 1.5);
                reading.put("seen", 1_700_000_000_000L + i);
                reading.put("note", i % 2 == 0 ? null : "odd " + i);
                RecordMetadata written = producer.send(new ProducerRecord<>(topic, 0, "key-" + i, reading)).get();
                emit(Map.of("type", "produced", "offset", written.offset()));
            }
        }
    }

    static void consume(String bootstrap, String registry, String topic, int count) throws Exception {
        Properties settings = new Properties();
        settings.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        settings.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        settings.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        KafkaAvroDeserializer deserializer = new KafkaAvroDeserializer();
        deserializer.configure(Map.of("schema.registry.url", registry), false);
        TopicPartition partition = new TopicPartition(topic, 0);
        int read = 0;
        long deadline = System.currentTimeMillis() + POLL_LIMIT_MS;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(settings)) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            while (read < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    GenericRecord value = (GenericRecord) deserializer.deserialize(topic, record.value());
                    Map<String, Object> fields = new LinkedHashMap<>();
                    for (Schema.Field field : value.getSchema().getFields()) {
                        Object got = value.get(field.name());
                        fields.put(field.name(), got instanceof CharSequence ? got.toString() : got);
                    }
                    int schemaId = java.nio.ByteBuffer.wrap(record.value(), 1, 4).getInt();
                    emit(Map.of("type", "record", "offset", record.offset(), "schema_id", schemaId,
                            "schema", value.getSchema().getFullName(), "value", fields));
                    read++;
                }
            }
        } finally {
            deserializer.close();
        }
        emit(Map.of("type", "done", "read", read));
    }

    static void emit(Map<String, Object> line) throws Exception {
        System.out.println(JSON.writeValueAsString(line));
        System.out.flush();
    }
}
