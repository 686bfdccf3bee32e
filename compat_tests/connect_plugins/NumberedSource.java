// A source connector of kbroker's Connect tests: one task sends the records numbered 0 to count - 1 to a topic,
// then idles; after a restart or a new config it resumes after the last number whose offset Connect committed.
//
//   connector.class=NumberedSource  topic=<topic>  count=<n>  [text=<value prefix, "record" by default>]
//   [timestamp.ms=<record 0's timestamp, record n's is timestamp.ms + n; the task's clock when absent>]
//
// Record n: key "n" and value "<text> <n>" (both string schemas), source partition {"topic": <topic>} and source
// offset {"next": n + 1}. The text may change between configs: the records already sent keep theirs.

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

public final class NumberedSource extends SourceConnector {
    static final String VERSION = "1.0";
    static final ConfigDef CONFIG = new ConfigDef()
            .define("topic", Type.STRING, Importance.HIGH, "The topic the records go to.")
            .define("count", Type.LONG, ConfigDef.NO_DEFAULT_VALUE, ConfigDef.Range.atLeast(0), Importance.HIGH,
                    "How many records, numbered from 0.")
            .define("text", Type.STRING, "record", Importance.LOW, "What each value says before its number.")
            .define("timestamp.ms", Type.LONG, -1L, Importance.LOW,
                    "Record 0's timestamp (record n's is this plus n); -1 for the task's clock.");

    private Map<String, String> settings;

    @Override
    public void start(Map<String, String> properties) {
        new AbstractConfig(CONFIG, properties);  // a bad config fails the connector here, not its task
        settings = Map.copyOf(properties);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return Numbers.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(settings);  // one sequence, one task
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public String version() {
        return VERSION;
    }

    public static final class Numbers extends SourceTask {
        private static final int BATCH_RECORDS_MAX = 100;
        private static final long IDLE_MS = 100;  // a poll with nothing to send; stop() waits at most this long

        private String topic;
        private long count;
        private String text;
        private long firstTimestampMs;
        private Map<String, String> partition;
        private long next;

        @Override
        public void start(Map<String, String> properties) {
            AbstractConfig config = new AbstractConfig(CONFIG, properties);
            topic = config.getString("topic");
            count = config.getLong("count");
            text = config.getString("text");
            firstTimestampMs = config.getLong("timestamp.ms");
            partition = Map.of("topic", topic);
            Map<String, Object> committed = context.offsetStorageReader().offset(partition);
            next = committed == null ? 0 : ((Number) committed.get("next")).longValue();
        }

        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            if (next >= count) {
                Thread.sleep(IDLE_MS);
                return null;
            }
            List<SourceRecord> batch = new ArrayList<>();
            for (; next < count && batch.size() < BATCH_RECORDS_MAX; next++) {
                long timestampMs = firstTimestampMs >= 0 ? firstTimestampMs + next : System.currentTimeMillis();
                batch.add(new SourceRecord(partition, Map.of("next", next + 1), topic, null, Schema.STRING_SCHEMA,
                        Long.toString(next), Schema.STRING_SCHEMA, text + " " + next, timestampMs));
            }
            return batch;
        }

        @Override
        public void stop() {
        }

        @Override
        public String version() {
            return VERSION;
        }
    }
}
