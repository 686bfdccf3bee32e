// Tests of a Node service's Kafka code against a kbroker test broker, with kafkajs and `node --test`.
//
// One test broker serves the file (`kbroker test-broker`, or `$KBROKER test-broker`); each test begins on
// an empty broker with no faults. The broker stops by itself if this process dies. The control API the
// tests call is described in kbroker's docs/test-broker.md.
'use strict'

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const net = require('node:net')
const readline = require('node:readline')
const { after, before, beforeEach, test } = require('node:test')
const { Kafka, Partitioners, logLevel } = require('kafkajs')

const TIMEOUT_MS = 30_000
let broker

before(async () => {
  broker = await startTestBroker()
})

after(async () => {
  await broker?.stop()
})

beforeEach(async () => {
  await broker.post('/faults/clear', {})
  await broker.post('/reset', {})
})

test('the producer retries NOT_LEADER_OR_FOLLOWER, then its record is appended', async (t) => {
  const kafka = client()
  await createTopic(kafka, 'orders')
  // The next two Produce requests for "orders" are refused as if the leader had just moved.
  await broker.post('/faults/fail', { api: 'Produce', error: 'NOT_LEADER_OR_FOLLOWER', count: 2, topic: 'orders' })

  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
  let produceRequests = 0
  producer.on(producer.events.REQUEST, ({ payload }) => {
    if (payload.apiName === 'Produce') produceRequests += 1
  })
  await producer.connect()
  t.after(() => producer.disconnect())
  const [sent] = await producer.send({ topic: 'orders', messages: [{ key: 'order-1', value: '42 apples' }] })
  assert.ok(produceRequests >= 3, `the producer sent ${produceRequests} Produce requests; two refused and a third appended make 3`)

  const { records } = await broker.get(`/topics/${encodeURIComponent('orders')}/records`)
  assert.equal(records.length, 1)
  assert.equal(Buffer.from(records[0].value, 'base64').toString(), '42 apples')
  assert.equal(String(records[0].offset), sent.baseOffset)
})

test('clients reconnect after the broker closes their connections', async (t) => {
  const connections = { count: 0 }
  const kafka = client({ socketFactory: countingSockets(connections) })
  await createTopic(kafka, 'payments')
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
  const consumer = kafka.consumer({ groupId: 'billing', maxWaitTimeInMs: 200 })
  await producer.connect()
  t.after(() => producer.disconnect())
  await consumer.connect()
  t.after(() => consumer.disconnect())
  const seen = []
  await consumer.subscribe({ topic: 'payments', fromBeginning: true })
  await consumer.run({ eachMessage: async ({ message }) => { seen.push(message.value.toString()) } })

  await producer.send({ topic: 'payments', messages: [{ value: 'first' }] })
  await waitFor(() => seen.includes('first'), 'the consumer to read "first"')
  const connectionsBefore = connections.count

  const { closed } = await broker.post('/faults/close-connections', {})
  assert.ok(closed >= 2, `the broker closed ${closed} connections, not the producer's and the consumer's`)
  await producer.send({ topic: 'payments', messages: [{ value: 'second' }] })
  await waitFor(() => seen.includes('second'), 'the consumer to read "second"')
  assert.ok(connections.count > connectionsBefore, 'the clients went on without connecting again')
})

test('reset leaves an empty broker', async (t) => {
  const kafka = client()
  await createTopic(kafka, 'leftovers')
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
  await producer.connect()
  await producer.send({ topic: 'leftovers', messages: [{ value: 'from an earlier test' }] })
  await producer.disconnect()

  await broker.post('/reset', {})
  const admin = kafka.admin()
  await admin.connect()
  t.after(() => admin.disconnect())
  assert.ok(!(await admin.listTopics()).includes('leftovers'))
})

// --- the client side --------------------------------------------------------------------------------

function client (options = {}) {
  return new Kafka({ brokers: [broker.bootstrap], logLevel: logLevel.WARN, connectionTimeout: 3000, ...options })
}

async function createTopic (kafka, topic) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true, timeout: TIMEOUT_MS })
  } finally {
    await admin.disconnect()
  }
}

// kafkajs's socketFactory option: plain TCP, each connection counted.
function countingSockets (connections) {
  return ({ host, port, onConnect }) => {
    connections.count += 1
    const socket = net.connect({ host, port }, onConnect)
    socket.setKeepAlive(true, 60_000)
    return socket
  }
}

async function waitFor (condition, what) {
  const deadline = Date.now() + TIMEOUT_MS
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

// --- the test broker: `kbroker test-broker` and its control API ------------------------------------

async function startTestBroker () {
  const child = spawn(process.env.KBROKER || 'kbroker', ['test-broker'], { stdio: ['ignore', 'pipe', 'inherit'] })
  const lines = readline.createInterface({ input: child.stdout })
  let timer
  try {
    const line = await Promise.race([
      new Promise((resolve) => lines.once('line', resolve)),
      new Promise((resolve, reject) => {
        child.once('error', reject)
        child.once('exit', (code) => reject(new Error(`the test broker exited (${code})`)))
        timer = setTimeout(() => reject(new Error(`no line from the test broker within ${TIMEOUT_MS} ms`)), TIMEOUT_MS)
      })
    ])
    const { bootstrap, control } = JSON.parse(line)
    return { bootstrap, control, get: (path) => call('GET', control + path), post: (path, body) => call('POST', control + path, body), stop: () => stop(child) }
  } catch (error) {
    child.kill('SIGKILL')
    throw error
  } finally {
    clearTimeout(timer)
  }
}

async function call (method, url, body) {
  const response = await fetch(url, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(TIMEOUT_MS)
  })
  const text = await response.text()
  if (response.status !== 200) throw new Error(`${method} ${new URL(url).pathname}: ${response.status} ${text}`)
  return JSON.parse(text)
}

function stop (child) {
  if (child.exitCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS)
    child.once('exit', () => { clearTimeout(timer); resolve() })
    child.kill('SIGTERM') // the broker stops cleanly
  })
}
