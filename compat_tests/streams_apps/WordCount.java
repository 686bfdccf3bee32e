// Word count: lines of text in, every word's running count out, one record per update.
//
//   java WordCount app.input=<topic> app.output=<topic> [app.pause.after.updates=<n> [app.pause.ms=<ms>]]
//                  <Streams property>=<value> ...
//
// The lines are split into lowercase words and regrouped by word through the repartition topic
// <application.id>-words-repartition; the counts live in the persistent (RocksDB) store "counts", logged to
// <application.id>-counts-changelog. Every update goes to the output topic (word -> count as an 8-byte long)
// when the record cache is off (statestore.cache.max.bytes=0).
//
// app.pause.after.updates=<n> holds the stream thread once its n-th update since the process started has gone to
// the output topic, for app.pause.ms (a minute by default), after a `paused` line: the open transaction's
// records are sent (the producer lingers 100 ms) but not committed, for a test to kill the process in the
// middle of a transaction.

import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

public final class WordCount {
    public static void main(String[] args) throws InterruptedException {
        StreamsAppRunner app = StreamsAppRunner.fromArgs(args);
        long pauseAfter = Long.parseLong(app.option("pause.after.updates", "0"));
        long pauseMs = Long.parseLong(app.option("pause.ms", "60000"));
        AtomicLong updates = new AtomicLong();

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, Long> counts = builder
                .stream(app.option("input"), Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("[^a-z0-9]+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
                .toStream();
        counts.to(app.option("output"), Produced.with(Serdes.String(), Serdes.Long()));
        // A second child of the same node, called after the sink: the update that pauses has been sent.
        counts.foreach((word, count) -> {
            long done = updates.incrementAndGet();
            if (done == pauseAfter) {
                StreamsAppRunner.emit("paused", "updates", done, "word", word, "count", count);
                sleep(pauseMs);
            }
        });
        app.run(builder.build());
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
