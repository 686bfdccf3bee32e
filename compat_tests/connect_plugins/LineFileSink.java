// A sink connector of kbroker's Connect tests: each record's value, as Java's String.valueOf prints it, appended to
// a file as one line. A batch is written in one write before put() returns, so the file holds exactly what Connect
// delivered, offsets are never committed ahead of it, and tasks in several workers may share one file.
//
//   connector.class=LineFileSink  topics=<topics>  file=<path>  [tasks.max=<n>]

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

public final class LineFileSink extends SinkConnector {
    static final String VERSION = "1.0";
    static final ConfigDef CONFIG = new ConfigDef()
            .define("file", Type.STRING, Importance.HIGH, "The file the lines are appended to.");

    private Map<String, String> settings;

    @Override
    public void start(Map<String, String> properties) {
        new AbstractConfig(CONFIG, properties);
        settings = Map.copyOf(properties);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return Lines.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return Collections.nCopies(maxTasks, settings);
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

    public static final class Lines extends SinkTask {
        private FileOutputStream file;

        @Override
        public void start(Map<String, String> properties) {
            String path = new AbstractConfig(CONFIG, properties).getString("file");
            try {
                file = new FileOutputStream(path, true);  // O_APPEND: whole writes of several tasks do not mix
            } catch (IOException error) {
                throw new ConnectException("cannot open " + path, error);
            }
        }

        @Override
        public void put(Collection<SinkRecord> records) {
            if (records.isEmpty()) {
                return;
            }
            StringBuilder lines = new StringBuilder();
            for (SinkRecord record : records) {
                lines.append(record.value()).append('\n');
            }
            try {
                file.write(lines.toString().getBytes(StandardCharsets.UTF_8));
            } catch (IOException error) {
                throw new ConnectException("cannot write " + records.size() + " lines", error);
            }
        }

        @Override
        public void stop() {
            try {
                if (file != null) {
                    file.close();
                }
            } catch (IOException error) {
                throw new ConnectException("cannot close the file", error);
            }
        }

        @Override
        public String version() {
            return VERSION;
        }
    }
}
