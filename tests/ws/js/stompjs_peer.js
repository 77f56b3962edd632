// stomp.js (@stomp/stompjs 7 over the ws package) against a STOMP-over-WebSocket URL: tests/ws/test_stompjs.py.
// Subscribes to /queue/to-js, says "ready", prints each message it gets (text or binary) as a JSON line,
// and after two answers with a text and a binary message to /queue/to-py; then "done".
const { Client } = require("@stomp/stompjs");
const WebSocket = require("ws");

const url = process.argv[2];
const seen = [];
const client = new Client({
  webSocketFactory: () => new WebSocket(url, ["v12.stomp", "v11.stomp", "v10.stomp"]),
  connectHeaders: { login: "guest", passcode: "guest" },
  heartbeatIncoming: 1000,
  heartbeatOutgoing: 1000,
  reconnectDelay: 0,
  onStompError: (frame) => { console.log(JSON.stringify({ error: frame.headers.message })); process.exit(2); },
  onWebSocketError: () => { console.log(JSON.stringify({ error: "websocket" })); process.exit(3); },
});
const say = (item) => console.log(JSON.stringify(item));
client.onConnect = (frame) => {
  client.subscribe("/queue/to-js", (message) => {
    // (stomp.js keeps every body as bytes: isBinaryBody says nothing of the WebSocket message's kind)
    seen.push(message);
    say({ text: message.body, hex: Buffer.from(message.binaryBody).toString("hex") });
    if (seen.length === 2) {
      client.publish({ destination: "/queue/to-py", body: "grüße from stomp.js" });
      client.publish({ destination: "/queue/to-py", binaryBody: new Uint8Array([0, 255, 1, 0]),
                       headers: { "content-type": "application/octet-stream" } });
      client.publish({ destination: "/queue/to-py", body: "end", headers: { receipt: "r-end" } });
      client.watchForReceipt("r-end", () => { say({ done: true }); client.deactivate().then(() => process.exit(0)); });
    }
  });
  // (the SUBSCRIBE is on the wire before this line is read by the test)
  client.publish({ destination: "/queue/ready", body: "x", headers: { receipt: "r-ready" } });
  client.watchForReceipt("r-ready", () => say({ ready: true, version: frame.headers.version }));
};
setTimeout(() => { say({ error: "timeout" }); process.exit(4); }, 20000);
client.activate();
