"""HookedSession: the trainer's MonitoredSession, with a fast path for the training step.

A plain MonitoredSession analyses the merged fetches of the caller and of every hook on each
run. A training loop asks for the same fetches step after step, so this subclass compiles each
distinct combination once into a session callable (``CallableOptions``) and reuses it. Hooks
see exactly what a MonitoredSession gives them (``before_run`` for every hook, in order, and
``after_run`` with their results); runs the fast path cannot express (run options, run
metadata, dict fetches, unusual fetch types) take the general path, which merges fetches like
MonitoredSession does.

Per step the fast path costs a few microseconds of Python: a combination is looked up by the
identity of its graph elements (tensors and ops live as long as the graph, and the plan keeps
them alive, so an identity cannot be reused), lists are looked up by their contents, and a
hook that declares ``needs_after_run = False`` is not called after the run.
"""

from __future__ import annotations

import numpy as np
from tensorflow.core.protobuf.config_pb2 import CallableOptions

from .compat import tf, tfv1

__all__ = ["HookedRuns", "HookedSession", "make_session_callable"]

_GENERAL = object()  # plan-cache marker: this combination takes the general path
_GRAPH_ELEMENTS = (tf.Tensor, tf.Operation)


def make_session_callable(sess, feeds=(), fetches=(), targets=(), in_caller_thread: bool = False):
    """A callable that runs ``targets`` and returns the values of ``fetches`` (tensors), taking
    the values of ``feeds`` positionally, as numpy arrays of the feeds' dtypes.

    ``Session.make_callable`` does this only without a ``feed_list``; with one, TensorFlow falls
    back to a full ``Session.run`` per call, several times slower for small steps.

    ``in_caller_thread=True`` runs the ops in the calling thread instead of TensorFlow's
    inter-op threads: for a tiny graph (an enqueue) that saves the thread switches, which
    otherwise disturb a training step running at the same time. Not for real computations:
    their independent ops would no longer run in parallel.
    """
    graph = sess.graph
    options = CallableOptions()
    options.feed.extend(graph.as_graph_element(f).name for f in feeds)
    options.fetch.extend(graph.as_graph_element(f).name for f in fetches)
    options.target.extend(graph.as_graph_element(t).name for t in targets)
    if in_caller_thread:
        options.run_options.inter_op_thread_pool = -1
    return sess._make_callable_from_options(options)


class _Reuse(tfv1.train.SessionCreator):
    """Hands an existing session to MonitoredSession."""

    def __init__(self, sess):
        self._sess = sess

    def create_session(self):
        return self._sess


def _fetch_key(fetches):
    """A hashable key for a fetch structure, or _GENERAL if it has no cheap exact key.

    Tensors and ops are keyed by identity (the plan keeps them alive); containers by content.
    """
    if fetches is None:
        return None
    if isinstance(fetches, _GRAPH_ELEMENTS):
        return id(fetches)
    if isinstance(fetches, str):
        return fetches
    if isinstance(fetches, (list, tuple)):
        keys = tuple(_fetch_key(f) for f in fetches)
        return _GENERAL if any(k is _GENERAL for k in keys) else (type(fetches), keys)
    if isinstance(fetches, tf.Variable):
        return ("variable", id(fetches))
    return _GENERAL


def _immutable(fetches) -> bool:
    """Whether a fetch is one graph element (or None): the same object always means the same
    fetch, unlike a list, which can be changed in place."""
    return fetches is None or isinstance(fetches, _GRAPH_ELEMENTS)


def _getter(layout):
    """A function of the flat callable results that rebuilds one fetch structure (None for
    structures whose value is None: nothing, or ops only)."""
    if layout is None or layout[0] == "op":
        return None
    if layout[0] == "tensor":
        index = layout[1]
        return lambda flat: flat[index]
    container, items = layout
    getters = [_getter(i) for i in items]
    return lambda flat: container(None if g is None else g(flat) for g in getters)


class _Plan:
    """One compiled combination of fetches and feed keys: flat callable plus how to rebuild results."""

    def __init__(self, sess, structures, feed_keys):
        graph = sess.graph
        fetch_names: list[str] = []
        targets: list[str] = []
        index = {}

        def flatten(fetches):
            if fetches is None:
                return None
            if isinstance(fetches, (list, tuple)):
                return (type(fetches), [flatten(f) for f in fetches])
            element = graph.as_graph_element(fetches, allow_tensor=True, allow_operation=True)
            if isinstance(element, tf.Operation):
                if element.name not in targets:
                    targets.append(element.name)
                return ("op",)
            if not isinstance(element, tf.Tensor):
                raise TypeError(f"cannot fetch {fetches!r} on the fast path")
            if element.name not in index:
                index[element.name] = len(fetch_names)
                fetch_names.append(element.name)
            return ("tensor", index[element.name])

        getters = [_getter(flatten(s)) for s in structures]
        self._size = len(getters)
        self._getters = [(i, g) for i, g in enumerate(getters) if g is not None]
        self._dtypes = []
        for key in feed_keys:
            tensor = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
            if tensor.dtype == tf.string:
                raise TypeError("string feeds take the general path")
            self._dtypes.append(tensor.dtype.as_numpy_dtype)
        self.callable = make_session_callable(sess, feeds=feed_keys, fetches=fetch_names, targets=targets)
        # The objects whose identities key this plan: kept alive so that no identity is reused.
        self._keep = (structures, list(feed_keys))

    def run(self, feed_values) -> list:
        args = [np.asarray(v, dtype=dt) for v, dt in zip(feed_values, self._dtypes, strict=True)]
        flat = self.callable(*args)
        results = [None] * self._size
        for i, g in self._getters:
            results[i] = g(flat)
        return results


class HookedRuns:
    """Runs of an existing session with SessionRunHooks around each, on the fast path.

    Nothing else: no coordinator, no queue runners, and the session is never closed here. An
    inference runner evaluates in the trainer's session with one of these.
    """

    def __init__(self, sess, hooks):
        self._raw_sess = sess
        self._hook_list = list(hooks)
        self._before = [hook.before_run for hook in self._hook_list]
        self._after = [
            (i, hook.after_run)
            for i, hook in enumerate(self._hook_list)
            if getattr(hook, "needs_after_run", True)
        ]
        self._plans: dict = {}
        self._by_identity: dict = {}
        self._caller_args = tfv1.train.SessionRunArgs(None)
        self._stop_requested = False

    def should_stop(self) -> bool:
        """Whether a hook asked to stop (``run_context.request_stop()``)."""
        return self._stop_requested

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        if self._stop_requested:
            raise RuntimeError("Run called even after should_stop requested.")
        args = self._caller_args
        if args.fetches is not fetches or args.feed_dict is not feed_dict:  # (a namedtuple: shareable)
            args = self._caller_args = tfv1.train.SessionRunArgs(fetches, feed_dict)
        context = tfv1.train.SessionRunContext(args, self._raw_sess)
        requests = [before(context) for before in self._before]
        feeds = _merge_feeds(feed_dict, requests)

        plan = _GENERAL
        if options is None and run_metadata is None:
            plan = self._plan_for(fetches, requests, feeds)
        if plan is _GENERAL:
            results, run_options, metadata = self._run_general(
                fetches, feeds, requests, options, run_metadata
            )
        else:
            results = plan.run(feeds.values()) if feeds else plan.run(())
            run_options = metadata = None

        for i, after in self._after:
            value = results[i + 1] if requests[i] is not None else None
            values = tfv1.train.SessionRunValues(results=value, options=run_options, run_metadata=metadata)
            after(context, values)
        if context.stop_requested:
            self._stop_requested = True
        return results[0]

    def _plan_for(self, fetches, requests, feeds):
        # First by identity: a step usually brings the very objects of the step before.
        ident = [id(fetches)]
        for r in requests:
            if r is None:
                ident.append(0)
            elif r.options is not None:
                return _GENERAL
            else:
                ident.append(id(r.fetches))
        if feeds:
            ident.extend(map(id, feeds))
        ident = tuple(ident)
        plan = self._by_identity.get(ident)
        if plan is not None:
            return plan
        key = [_fetch_key(fetches)]
        key.extend(None if r is None else _fetch_key(r.fetches) for r in requests)
        if _GENERAL in key:
            return _GENERAL
        key.append(tuple(map(id, feeds)) if feeds else ())
        key = tuple(key)
        plan = self._plans.get(key)
        if plan is None:
            structures = [fetches] + [None if r is None else r.fetches for r in requests]
            try:
                plan = _Plan(self._raw_sess, structures, list(feeds or ()))
            except (TypeError, ValueError, KeyError):
                plan = _GENERAL
            self._plans[key] = plan
        stable = _immutable(fetches) and all(r is None or _immutable(r.fetches) for r in requests)
        if plan is not _GENERAL and stable:
            # The plan keeps these objects alive, so their identities stay theirs.
            self._by_identity[ident] = plan
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


class HookedSession(HookedRuns, tfv1.train.MonitoredSession):
    """A MonitoredSession over an existing session whose hooks are the trainer's callbacks.

    Hooks get ``begin``/``after_create_session``/``end`` from MonitoredSession; runs take the
    fast path of :class:`HookedRuns`.
    """

    def __init__(self, sess, hooks):
        HookedRuns.__init__(self, sess, hooks)
        tfv1.train.MonitoredSession.__init__(self, session_creator=_Reuse(sess), hooks=self._hook_list)

    def should_stop(self) -> bool:
        if self._stop_requested:
            return True
        # What MonitoredSession's layers come down to while the session is open (our runs
        # bypass them): the coordinator's stop request, re-raising a coordinated thread's error.
        coord = getattr(self._coordinated_creator, "coord", None)
        if coord is None:
            return tfv1.train.MonitoredSession.should_stop(self)
        if coord.should_stop():  # a thread that fails requests the stop with its error
            coord.raise_requested_exception()
            return True
        return False

    def close(self) -> None:
        self._plans.clear()
        self._by_identity.clear()
        tfv1.train.MonitoredSession.close(self)


def _merge_feeds(feed_dict, requests):
    """The caller's feeds and the hooks' in one dict; a tensor fed twice is an error.

    With a single source of feeds (the usual case: the input source's hook) its dict is used as
    it is; dicts are only copied when several must be merged.
    """
    feeds = feed_dict or None
    owned = False
    for req in requests:
        if req is None or not req.feed_dict:
            continue
        if feeds is None:
            feeds = req.feed_dict
            continue
        overlap = feeds.keys() & req.feed_dict.keys()
        if overlap:
            raise RuntimeError(f"the same tensor is fed by more than one hook or the caller: {overlap}")
        if not owned:
            feeds, owned = dict(feeds), True
        feeds.update(req.feed_dict)
    return feeds
