"""HookedSession: the trainer's MonitoredSession, with a fast path for the training step.

A plain MonitoredSession analyses the merged fetches of the caller and of every hook on each
run. A training loop asks for the same fetches step after step, so this subclass compiles each
distinct combination once into a session callable (``CallableOptions``) and reuses it. Hooks
see exactly what a MonitoredSession gives them (``before_run`` / ``after_run`` for every hook,
in order, with their results); runs the fast path cannot express (run options, run metadata,
dict fetches, unusual fetch types) take the general path, which merges fetches like
MonitoredSession does.
"""

from __future__ import annotations

import numpy as np
from tensorflow.core.protobuf.config_pb2 import CallableOptions

from .compat import tf, tfv1

__all__ = ["HookedSession"]

_GENERAL = object()  # plan-cache marker: this combination takes the general path


class _Reuse(tfv1.train.SessionCreator):
    """Hands an existing session to MonitoredSession."""

    def __init__(self, sess):
        self._sess = sess

    def create_session(self):
        return self._sess


def _fetch_key(fetches):
    """A hashable key for a fetch structure, or _GENERAL if it has no cheap exact key."""
    if fetches is None or isinstance(fetches, (tf.Operation, tf.Tensor, str)):
        return fetches
    if isinstance(fetches, (list, tuple)):
        keys = tuple(_fetch_key(f) for f in fetches)
        return _GENERAL if any(k is _GENERAL for k in keys) else (type(fetches), keys)
    if isinstance(fetches, tf.Variable):
        return fetches
    return _GENERAL


class _Plan:
    """One compiled combination of fetches and feed keys: flat callable plus how to rebuild results."""

    def __init__(self, sess, structures, feed_keys):
        graph = sess.graph
        self.fetch_names: list[str] = []
        self.targets: list[str] = []
        index = {}

        def flatten(fetches):
            if fetches is None:
                return None
            if isinstance(fetches, (list, tuple)):
                return (type(fetches), [flatten(f) for f in fetches])
            element = graph.as_graph_element(fetches, allow_tensor=True, allow_operation=True)
            if isinstance(element, tf.Operation):
                if element.name not in self.targets:
                    self.targets.append(element.name)
                return ("op",)
            if not isinstance(element, tf.Tensor):
                raise TypeError(f"cannot fetch {fetches!r} on the fast path")
            if element.name not in index:
                index[element.name] = len(self.fetch_names)
                self.fetch_names.append(element.name)
            return ("tensor", index[element.name])

        self.layout = [flatten(s) for s in structures]
        self.feeds = []
        for key in feed_keys:
            tensor = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
            if tensor.dtype == tf.string:
                raise TypeError("string feeds take the general path")
            self.feeds.append(tensor.dtype.as_numpy_dtype)
        options = CallableOptions()
        options.feed.extend(graph.as_graph_element(k).name for k in feed_keys)
        options.fetch.extend(self.fetch_names)
        options.target.extend(self.targets)
        self.callable = sess._make_callable_from_options(options)

    def run(self, feed_values):
        args = [np.asarray(v, dtype=dt) for v, dt in zip(feed_values, self.feeds, strict=True)]
        flat = self.callable(*args)
        return [_rebuild(layout, flat) for layout in self.layout]


def _rebuild(layout, flat):
    if layout is None:
        return None
    kind = layout[0]
    if kind == "op":
        return None
    if kind == "tensor":
        return flat[layout[1]]
    container, items = layout
    return container(_rebuild(i, flat) for i in items)


class HookedSession(tfv1.train.MonitoredSession):
    """A MonitoredSession over an existing session whose hooks are the trainer's callbacks."""

    def __init__(self, sess, hooks):
        self._raw_sess = sess
        self._hook_list = list(hooks)
        self._plans: dict = {}
        self._stop_requested = False
        super().__init__(session_creator=_Reuse(sess), hooks=self._hook_list)

    def should_stop(self) -> bool:
        return self._stop_requested or super().should_stop()

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        if self._stop_requested:
            raise RuntimeError("Run called even after should_stop requested.")
        context = tfv1.train.SessionRunContext(tfv1.train.SessionRunArgs(fetches, feed_dict), self._raw_sess)
        requests = [hook.before_run(context) for hook in self._hook_list]
        feeds = dict(feed_dict) if feed_dict else {}
        for req in requests:
            if req is not None and req.feed_dict:
                overlap = set(feeds) & set(req.feed_dict)
                if overlap:
                    raise RuntimeError(
                        f"the same tensor is fed by more than one hook or the caller: {overlap}"
                    )
                feeds.update(req.feed_dict)

        plan = _GENERAL
        if options is None and run_metadata is None and all(r is None or r.options is None for r in requests):
            key = (
                _fetch_key(fetches),
                tuple(None if r is None else _fetch_key(r.fetches) for r in requests),
                tuple(feeds),
            )
            if not any(k is _GENERAL for k in (key[0], *key[1])):
                plan = self._plans.get(key)
                if plan is None:
                    plan = self._compile(key, fetches, requests, feeds)
        if plan is _GENERAL:
            results, run_options, metadata = self._run_general(
                fetches, feeds, requests, options, run_metadata
            )
        else:
            results = plan.run(list(feeds.values()))
            run_options = metadata = None

        for hook, req, value in zip(self._hook_list, requests, results[1:], strict=True):
            hook.after_run(
                context,
                tfv1.train.SessionRunValues(
                    results=value if req is not None else None, options=run_options, run_metadata=metadata
                ),
            )
        if context.stop_requested:
            self._stop_requested = True
        return results[0]

    def _compile(self, key, fetches, requests, feeds):
        structures = [fetches] + [None if r is None else r.fetches for r in requests]
        try:
            plan = _Plan(self._raw_sess, structures, list(feeds))
        except (TypeError, ValueError, KeyError):
            plan = _GENERAL
        self._plans[key] = plan
        return plan

    def _run_general(self, fetches, feeds, requests, options, run_metadata):
        """Merge like MonitoredSession: one run of a dict of fetches, merged run options."""
        merged = {"caller": fetches}
        run_options = tfv1.RunOptions()
        if options is not None:
            run_options.MergeFrom(options)
        for i, req in enumerate(requests):
            if req is None:
                continue
            if req.fetches is not None:
                merged[i] = req.fetches
            if req.options is not None:
                run_options.trace_level = max(run_options.trace_level, req.options.trace_level)
                run_options.timeout_in_ms = max(run_options.timeout_in_ms, req.options.timeout_in_ms)
                run_options.debug_options.MergeFrom(req.options.debug_options)
        metadata = run_metadata if run_metadata is not None else tfv1.RunMetadata()
        out = self._raw_sess.run(merged, feed_dict=feeds or None, options=run_options, run_metadata=metadata)
        results = [out["caller"]] + [out.get(i) for i in range(len(requests))]
        return results, run_options, metadata

    def close(self) -> None:
        self._plans.clear()
        super().close()
