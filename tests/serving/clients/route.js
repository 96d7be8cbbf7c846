'use strict';
// Looks topics up with the real ali-ons client (mq_client_api, GET_ROUTEINFO_BY_TOPIC, version 121).
// usage: node route.js HOST:PORT TOPIC... ; prints {topic: {route: TopicRouteData} | {error: {...}}} as JSON.
const MQClientAPI = require('ali-ons/lib/mq_client_api');

const silent = { debug() {}, info() {}, warn() {}, error() {} };

async function main() {
  const [ nameSrv, ...topics ] = process.argv.slice(2);
  const api = new MQClientAPI({ nameSrv, httpclient: {}, logger: silent, responseTimeout: 10000 });
  await api.ready();
  const out = {};
  for (const topic of topics) {
    try {
      out[topic] = { route: await api.getDefaultTopicRouteInfoFromNameServer(topic, 10000) };
    } catch (err) {
      out[topic] = { error: { name: err.name, code: err.code, message: err.message } };
    }
  }
  await api.close();
  process.stdout.write(JSON.stringify(out));
}

main().catch(err => {
  process.stderr.write(String(err && err.stack || err) + '\n');
  process.exit(1);
});
