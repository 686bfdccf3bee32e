// Clicks per user per tumbling window, emitted once when the window closes, and every click enriched with
// its user's region.
//
//   java ClickWindows app.clicks=<topic> app.users=<topic> app.window.counts=<topic> app.enriched=<topic>
//                     app.window.ms=<ms> app.grace.ms=<ms> <Streams property>=<value> ...
//
// Clicks are keyed by user, valued by page; users (a table) are keyed by user, valued by region. The two
// topics must have as many partitions as each other (the join is co-partitioned).
//   window counts: clicks grouped by user in tumbling windows of app.window.ms with app.grace.ms of grace,
//                  counted, suppressed until the window closes (stream time past its end and the grace), then
//                  written as "<user>@<window start ms>" -> "<count>"
//   enriched:      each click joined with its user's current region (an inner KStream-KTable join; a click of
//                  an unknown user is dropped), written as <user> -> "<region>:<page>"

import java.time.Duration;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.WindowStore;

public final class ClickWindows {
    public static void main(String[] args) throws InterruptedException {
        StreamsAppRunner app = StreamsAppRunner.fromArgs(args);
        Duration window = Duration.ofMillis(Long.parseLong(app.option("window.ms")));
        Duration grace = Duration.ofMillis(Long.parseLong(app.option("grace.ms")));

        StreamsBuilder builder = new StreamsBuilder();
        Consumed<String, String> strings = Consumed.with(Serdes.String(), Serdes.String());
        KTable<String, String> users = builder.table(app.option("users"), strings);
        KStream<String, String> clicks = builder.stream(app.option("clicks"), strings);

        clicks.groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(window, grace))
                .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("click-counts")
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
                .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()).withName("final-counts"))
                .toStream((windowed, count) -> windowed.key() + "@" + windowed.window().start())
                .mapValues(count -> Long.toString(count))
                .to(app.option("window.counts"), Produced.with(Serdes.String(), Serdes.String()));

        clicks.join(users, (page, region) -> region + ":" + page)
                .to(app.option("enriched"), Produced.with(Serdes.String(), Serdes.String()));

        app.run(builder.build());
    }
}
