"""The serving shim: published route history answered as of any instant, over HTTP and remoting.

* :mod:`~nsreplay.serving.source` - :class:`RouteSource`, what both front ends ask (route, cluster,
  topic list, tables, history at an instant), and :class:`HistorySource`, the straightforward
  implementation over :class:`nsreplay.history.PublishedHistory` (the oracle for faster ones).
"""
