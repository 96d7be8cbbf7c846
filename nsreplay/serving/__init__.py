"""The serving shim: published route history answered as of any instant, over HTTP and remoting.

* :mod:`~nsreplay.serving.source` - :class:`RouteSource`, what both front ends ask (route, cluster,
  topic list, tables, history at an instant), and :class:`HistorySource`, the straightforward
  implementation over :class:`nsreplay.history.PublishedHistory` (the oracle for faster ones).
* :mod:`~nsreplay.serving.remoting` - the RocketMQ remoting wire format (frames, JSON and ROCKETMQ
  binary headers), :mod:`~nsreplay.serving.remoting_server` - the read-only, time-travelling
  NameServer endpoint (105/106/206), :mod:`~nsreplay.serving.remoting_client` - a tiny client for it.
* :mod:`~nsreplay.serving.index` - :class:`RouteIndex`, the fast :class:`RouteSource`: the latest
  published run in memory (columnar, sorted by key and valid_from), O(log n) point-in-time lookups,
  rendered route answers cached per (topic, state segment); answers exactly like HistorySource.
* :mod:`~nsreplay.serving.http_api` - the HTTP API (interfaces.md §2) on aiohttp;
  :mod:`~nsreplay.serving.openapi` - its OpenAPI document (``GET /openapi.json``);
  :mod:`~nsreplay.serving.config` - its limits, the ``[serve]`` section of ``conf/``.
* :mod:`~nsreplay.serving.server` - ``nsreplay serve``: HTTP and remoting on one event loop, hot
  reload of newer publishes; :mod:`~nsreplay.serving.bench` - ``nsreplay bench serve``.
"""
