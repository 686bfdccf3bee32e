// What the Kafka Streams applications of compat_tests/test_kafka_streams.py share: their command line, their
// output and their life. Compiled at test time by testkit/streams_apps.py, with the jars of the pom's
// `streams` profile (kafka-streams 4.4.0).
//
// Command line: key=value arguments. Those named app.<option> are the application's own options; every other
// one is a Kafka Streams property (StreamsConfig, with its consumer./producer./admin. prefixes), passed on as is.
//
// Output: one JSON object per line on stdout, each with an "event" and the wall clock's "at_ms":
//   state          {"old", "new"}: every KafkaStreams state change
//   tasks          {"active", "standby"}: the task ids this instance holds, each time they change (looked at
//                  every TASK_WATCH_MS)
//   restore_start  {"store", "topic", "partition", "start", "end"}: a store starts restoring from its changelog
//   restore_end    {"store", "topic", "partition", "restored"}: and is done, with how many records it read
//   error          {"thread", "chain"}: the exception that ended a stream thread, with its causes, each
//                  [class name, message]
//   closed         {"clean"}: the instance closed (after SIGTERM, or after an error)
// plus the lines each application adds (through emit).
//
// Life: SIGTERM closes the instance and leaves its group, so that its tasks move at once (a Streams consumer
// does not leave on close otherwise). An exception that ends a stream thread shuts the instance down and the
// process exits 1.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.processor.StateRestoreListener;

final class StreamsAppRunner {
    private static final String OPTION_PREFIX = "app.";
    private static final long TASK_WATCH_MS = 100;
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(30);

    private final Properties properties = new Properties();
    private final Map<String, String> options = new HashMap<>();
    private final CountDownLatch ended = new CountDownLatch(1);
    private volatile boolean failed;

    private StreamsAppRunner(String[] args) {
        properties.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        properties.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        for (String arg : args) {
            int equals = arg.indexOf('=');
            if (equals <= 0) {
                throw new IllegalArgumentException("expected key=value, got " + arg);
            }
            String key = arg.substring(0, equals), value = arg.substring(equals + 1);
            if (key.startsWith(OPTION_PREFIX)) {
                options.put(key.substring(OPTION_PREFIX.length()), value);
            } else {
                properties.put(key, value);
            }
        }
    }

    static StreamsAppRunner fromArgs(String[] args) {
        return new StreamsAppRunner(args);
    }

    String option(String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing app." + name + "=...");
        }
        return value;
    }

    String option(String name, String fallback) {
        return options.getOrDefault(name, fallback);
    }

    /** One output line: {"event": event, "at_ms": now, key: value, ...}; values are strings, numbers, booleans or
     * collections. */
    static void emit(String event, Object... keysAndValues) {
        StringBuilder line = new StringBuilder("{\"event\":").append(quote(event))
                .append(",\"at_ms\":").append(System.currentTimeMillis());
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

    /** Run the topology until SIGTERM (exit 0) or until an error ends it (exit 1). */
    void run(Topology topology) throws InterruptedException {
        KafkaStreams streams = new KafkaStreams(topology, properties);
        streams.setStateListener((newState, oldState) -> {
            emit("state", "old", oldState.name(), "new", newState.name());
            if (newState == KafkaStreams.State.ERROR || newState == KafkaStreams.State.NOT_RUNNING) {
                ended.countDown();
            }
        });
        streams.setGlobalStateRestoreListener(new RestoreLines());
        streams.setUncaughtExceptionHandler(exception -> {
            failed = true;
            emit("error", "thread", Thread.currentThread().getName(), "chain", causes(exception));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boolean clean = streams.close(CloseOptions.groupMembershipOperation(
                    CloseOptions.GroupMembershipOperation.LEAVE_GROUP).withTimeout(CLOSE_TIMEOUT));
            emit("closed", "clean", clean);
        }, "sigterm-close"));
        Thread watcher = new Thread(() -> watchTasks(streams), "task-watcher");
        watcher.setDaemon(true);
        streams.start();
        watcher.start();
        ended.await();
        if (failed) {
            System.exit(1);  // the shutdown hook closes the instance
        }
    }

    private static List<List<String>> causes(Throwable exception) {
        List<List<String>> chain = new ArrayList<>();
        for (Throwable cause = exception; cause != null && chain.size() < 10; cause = cause.getCause()) {
            chain.add(List.of(cause.getClass().getName(), String.valueOf(cause.getMessage())));
        }
        return chain;
    }

    private static void watchTasks(KafkaStreams streams) {
        List<TreeSet<String>> last = null;
        while (true) {
            KafkaStreams.State state = streams.state();
            if (state == KafkaStreams.State.RUNNING || state == KafkaStreams.State.REBALANCING) {
                try {
                    TreeSet<String> active = new TreeSet<>(), standby = new TreeSet<>();
                    for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                        for (TaskMetadata task : thread.activeTasks()) {
                            active.add(task.taskId().toString());
                        }
                        for (TaskMetadata task : thread.standbyTasks()) {
                            standby.add(task.taskId().toString());
                        }
                    }
                    List<TreeSet<String>> now = List.of(active, standby);
                    if (!now.equals(last)) {
                        emit("tasks", "active", active, "standby", standby);
                        last = now;
                    }
                } catch (RuntimeException notNow) {
                    // the instance left RUNNING or REBALANCING in between: look again later
                }
            } else if (state == KafkaStreams.State.PENDING_SHUTDOWN || state == KafkaStreams.State.NOT_RUNNING
                    || state == KafkaStreams.State.PENDING_ERROR || state == KafkaStreams.State.ERROR) {
                return;
            }
            try {
                Thread.sleep(TASK_WATCH_MS);
            } catch (InterruptedException stop) {
                return;
            }
        }
    }

    private static final class RestoreLines implements StateRestoreListener {
        @Override
        public void onRestoreStart(TopicPartition partition, String store, long startOffset, long endOffset) {
            emit("restore_start", "store", store, "topic", partition.topic(), "partition", partition.partition(),
                    "start", startOffset, "end", endOffset);
        }

        @Override
        public void onBatchRestored(TopicPartition partition, String store, long batchEndOffset, long restored) {
        }

        @Override
        public void onRestoreEnd(TopicPartition partition, String store, long restored) {
            emit("restore_end", "store", store, "topic", partition.topic(), "partition", partition.partition(),
                    "restored", restored);
        }
    }
}
