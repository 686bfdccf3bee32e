// Tests of a Go service's Kafka code against a kbroker test broker, with franz-go.
//
// TestMain starts one test broker for the package (`kbroker test-broker`, or $KBROKER test-broker) and
// stops it at the end; every test resets it before it starts. The broker stops by itself if this process
// dies. The control API the tests call is described in kbroker's docs/test-broker.md.
package orders

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const timeout = 30 * time.Second

var broker *testBroker

func TestMain(m *testing.M) {
	started, err := startTestBroker()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start the test broker:", err)
		os.Exit(1)
	}
	broker = started
	code := m.Run()
	broker.stop()
	os.Exit(code)
}

func TestProducerRetriesNotLeaderOrFollowerThenSucceeds(t *testing.T) {
	broker.reset(t)
	createTopic(t, "orders")
	// The next two Produce requests for "orders" are refused as if the leader had just moved.
	broker.post(t, "/faults/fail", map[string]any{
		"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 2, "topic": "orders"})

	hooks := &countingHooks{}
	client := newClient(t, kgo.WithHooks(hooks))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	produced, err := client.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("order-1"), Value: []byte("42 apples")}).First()
	if err != nil {
		t.Fatalf("the produce failed despite the client's retries: %v", err)
	}
	if writes := hooks.produceWrites.Load(); writes < 3 {
		t.Fatalf("the client wrote %d Produce requests; two refused and a third appended make 3", writes)
	}

	records := broker.records(t, "orders")
	if len(records) != 1 || string(records[0].Value) != "42 apples" || records[0].Offset != produced.Offset {
		t.Fatalf("the topic holds %+v, not the one record produced at offset %d", records, produced.Offset)
	}
}

func TestClientsReconnectAfterTheBrokerClosesTheirConnections(t *testing.T) {
	broker.reset(t)
	createTopic(t, "payments")
	producerHooks, consumerHooks := &countingHooks{}, &countingHooks{}
	producer := newClient(t, kgo.WithHooks(producerHooks))
	consumer := newClient(t, kgo.WithHooks(consumerHooks), kgo.ConsumeTopics("payments"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))

	produce(t, producer, "payments", "first")
	expectValue(t, consumer, "first")
	producerConnects, consumerConnects := producerHooks.connects.Load(), consumerHooks.connects.Load()

	answer := broker.post(t, "/faults/close-connections", map[string]any{})
	if closed, _ := answer["closed"].(float64); closed < 2 {
		t.Fatalf("the broker closed %v connections; the producer's and the consumer's make at least 2", answer["closed"])
	}
	produce(t, producer, "payments", "second")
	expectValue(t, consumer, "second")
	if producerHooks.connects.Load() <= producerConnects || consumerHooks.connects.Load() <= consumerConnects {
		t.Fatalf("the clients went on without connecting again (producer %d -> %d, consumer %d -> %d)",
			producerConnects, producerHooks.connects.Load(), consumerConnects, consumerHooks.connects.Load())
	}
}

func TestResetLeavesAnEmptyBroker(t *testing.T) {
	broker.reset(t)
	createTopic(t, "leftovers")
	produce(t, newClient(t), "leftovers", "from an earlier test")

	broker.reset(t)
	admin := kadm.NewClient(newClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	topics, err := admin.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("leftovers") {
		t.Fatalf("the topic outlived the reset: %v", topics.Names())
	}
}

// --- the client side ---------------------------------------------------------------------------------

// countingHooks counts what franz-go reports: Produce requests written and connections made.
type countingHooks struct {
	produceWrites atomic.Int64
	connects      atomic.Int64
}

func (h *countingHooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 0 && err == nil { // 0: Produce
		h.produceWrites.Add(1)
	}
}

func (h *countingHooks) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		h.connects.Add(1)
	}
}

func newClient(t *testing.T, options ...kgo.Opt) *kgo.Client {
	t.Helper()
	// franz-go refreshes metadata at most every 5 s by default, so each retry after a leader moved waits
	// that long; a test need not.
	defaults := []kgo.Opt{kgo.SeedBrokers(broker.Bootstrap), kgo.MetadataMinAge(100 * time.Millisecond)}
	client, err := kgo.NewClient(append(defaults, options...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

func createTopic(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := kadm.NewClient(newClient(t)).CreateTopic(ctx, 1, 1, nil, name); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

func produce(t *testing.T, client *kgo.Client, topic, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := client.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("produce %q: %v", value, err)
	}
}

// expectValue polls until a record with the value arrives, for at most the timeout.
func expectValue(t *testing.T, consumer *kgo.Client, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for ctx.Err() == nil {
		fetches := consumer.PollFetches(ctx)
		for _, record := range fetches.Records() {
			if string(record.Value) == value {
				return
			}
		}
	}
	t.Fatalf("no record %q within %v", value, timeout)
}

// --- the test broker: `kbroker test-broker` and its control API -------------------------------------

type testBroker struct {
	Bootstrap string `json:"bootstrap"`
	Control   string `json:"control"`
	Pid       int    `json:"pid"`
	command   *exec.Cmd
	http      *http.Client
}

// record is one record of GET /topics/{topic}/records; encoding/json decodes the base64 into bytes.
type record struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       []byte `json:"key"`
	Value     []byte `json:"value"`
}

func startTestBroker() (*testBroker, error) {
	executable := os.Getenv("KBROKER")
	if executable == "" {
		executable = "kbroker"
	}
	command := exec.Command(executable, "test-broker")
	command.Stderr = os.Stderr // its warnings, if any, beside the test's output
	stdout, err := command.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := command.Start(); err != nil {
		return nil, err
	}
	line := make(chan string, 1)
	go func() {
		text, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- text
	}()
	broker := &testBroker{command: command, http: &http.Client{Timeout: timeout}}
	select {
	case text := <-line:
		if err := json.Unmarshal([]byte(text), broker); err != nil || broker.Bootstrap == "" {
			broker.stop()
			return nil, fmt.Errorf("the test broker printed %q", text)
		}
		return broker, nil
	case <-time.After(timeout):
		broker.stop()
		return nil, fmt.Errorf("no line from the test broker within %v", timeout)
	}
}

func (b *testBroker) stop() {
	_ = b.command.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- b.command.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = b.command.Process.Kill()
		<-done
	}
}

func (b *testBroker) reset(t *testing.T) {
	t.Helper()
	b.post(t, "/faults/clear", map[string]any{})
	b.post(t, "/reset", map[string]any{})
}

func (b *testBroker) records(t *testing.T, topic string) []record {
	t.Helper()
	var answer struct {
		Records []record `json:"records"`
	}
	b.call(t, http.MethodGet, "/topics/"+url.PathEscape(topic)+"/records", nil, &answer)
	return answer.Records
}

func (b *testBroker) post(t *testing.T, path string, body map[string]any) map[string]any {
	t.Helper()
	answer := map[string]any{}
	b.call(t, http.MethodPost, path, body, &answer)
	return answer
}

func (b *testBroker) call(t *testing.T, method, path string, body map[string]any, answer any) {
	t.Helper()
	var payload io.Reader
	if body != nil {
		encoded, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		payload = bytes.NewReader(encoded)
	}
	request, err := http.NewRequest(method, b.Control+path, payload)
	if err != nil {
		t.Fatal(err)
	}
	response, err := b.http.Do(request)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer response.Body.Close()
	text, err := io.ReadAll(response.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if response.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s %s", method, path, response.Status, text)
	}
	if err := json.Unmarshal(text, answer); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, text)
	}
}
