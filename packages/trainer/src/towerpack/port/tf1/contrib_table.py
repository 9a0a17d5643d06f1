"""Where each tf.contrib name of TensorFlow 1.15 lives now, as data: the rewrite table of ``towerpack port``.

A name gets a ``Rewrite`` only where a maintained package keeps it with the same behaviour, defaults
included: tf-slim 1.1 (the code of contrib.slim, contrib.layers and contrib.framework's arg_scope and
variable helpers, moved out of TensorFlow unchanged), TensorFlow Probability (contrib.distributions'
successor) and TensorFlow's own tf.compat.v1 (where TF 1.15 had already given the contrib name a core
home). Where tf_upgrade_v2 suggests a home that behaves differently (tf.keras regularizers and
initializers for contrib.layers' ones), the exact home wins and the entry's note says why. A name with
only a near replacement gets a ``Nearest``: reported with how it differs, never rewritten.

Keys are paths under ``tf.`` (``contrib.layers.l2_regularizer``). Installing tf-slim and TensorFlow
Probability: ``pip install 'towerpack-trainer[contrib]'``.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

CONTRIB_EXTRA = "pip install 'towerpack-trainer[contrib]'"


@dataclass(frozen=True)
class Target:
    """A home: ``module`` is imported, ``path`` looked up on it (``tf_slim`` + ``layers.conv2d``)."""

    module: str
    path: str = ""

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.path}" if self.path else self.module

    @property
    def shown(self) -> str:
        return shown(self.dotted)

    def child(self, name: str) -> Target:
        return Target(self.module, f"{self.path}.{name}" if self.path else name)

    def from_import(self) -> tuple[str, str] | None:
        """(module, name) for ``from module import name``; ("", module) for a top-level module; None
        where a ``from`` import would not give the same object."""
        parent, _, name = self.dotted.rpartition(".")
        if parent in _NOT_IMPORTABLE:
            return None
        return _IMPORTABLE.get(parent, parent), name


def shown(dotted: str) -> str:
    """A path as code usually writes it: ``tfp.distributions.Normal``, ``tf.compat.v1.nest.flatten``."""
    for module, alias in (("tensorflow_probability", "tfp"), ("tensorflow", "tf")):
        if dotted == module or dotted.startswith(module + "."):
            return alias + dotted[len(module) :]
    return dotted


# Attribute paths that are not importable modules, and the module each one is (tf_slim.layers, the
# attribute, is the module of the layer functions; tf_slim.layers, the package, exports fewer names).
_IMPORTABLE = {
    "tensorflow_probability.distributions": "tensorflow_probability.python.distributions",
    "tensorflow_probability.bijectors": "tensorflow_probability.python.bijectors",
    "tf_slim.layers": "tf_slim.layers.layers",
}
# Importing this module (not reading the attribute) gives TensorFlow's internal copy of the Keras 2
# cells instead of tf-keras', and puts it in place of the attribute for everyone.
_NOT_IMPORTABLE = {"tensorflow.compat.v1.nn.rnn_cell"}


class Covers(enum.Enum):
    """What a rewrite covers beyond its own name."""

    NAME = "the name; attributes after it are its own"
    LISTED = "a module: its members that have entries of their own"
    ALL = "a module whose every member keeps its name in the new home"


@dataclass(frozen=True)
class Rewrite:
    """An exact home. A call is rewritten only if it passes at most ``max_positional`` arguments by
    position (a new parameter sits after them) and none of the keywords in ``unsupported``; keywords
    in ``renamed`` are renamed at the call."""

    target: Target
    covers: Covers = Covers.NAME
    note: str = ""
    max_positional: int | None = None
    renamed: tuple[tuple[str, str], ...] = ()
    unsupported: tuple[str, ...] = ()

    @property
    def constrained(self) -> bool:
        return self.max_positional is not None or bool(self.renamed) or bool(self.unsupported)


@dataclass(frozen=True)
class Nearest:
    """No exact home: the nearest replacement and how it differs. ``api`` (a dotted path of an
    installed package) is the replacement itself where there is one to name."""

    differs: str
    api: str | None = None

    @property
    def advice(self) -> str:
        return (
            f"no exact replacement; nearest: {shown(self.api)}: {self.differs}" if self.api else self.differs
        )


Entry = Rewrite | Nearest

SLIM = Target("tf_slim")
SLIM_NETS = Target("tf_slim.nets")
TFD = Target("tensorflow_probability", "distributions")
TFB = Target("tensorflow_probability", "bijectors")
V1 = Target("tensorflow.compat.v1")

TABLE: dict[str, Entry] = {}


def _add(contrib: str, target: Target, names: str, covers: Covers = Covers.NAME, **constraints) -> None:
    """``contrib.<name>`` -> ``target.<name>`` for each name (``old:new`` where the name changed)."""
    for item in names.split():
        old, _, new = item.partition(":")
        TABLE[f"{contrib}.{old}"] = Rewrite(target.child(new or old), covers, **constraints)


def _module(contrib: str, target: Target, covers: Covers = Covers.LISTED) -> None:
    TABLE[contrib] = Rewrite(target, covers)


# tf-slim: contrib.slim, contrib.layers and contrib.framework's helpers, moved out unchanged.
_LAYERS = (
    "GDN OPTIMIZER_CLS_NAMES OPTIMIZER_SUMMARIES RevBlock apply_regularization avg_pool2d avg_pool3d "
    "batch_norm bias_add conv1d conv2d conv2d_in_plane conv2d_transpose conv3d conv3d_transpose convolution "
    "convolution1d convolution2d convolution2d_in_plane convolution2d_transpose convolution3d "
    "convolution3d_transpose dense_to_sparse dropout elu flatten fully_connected gdn group_norm "
    "images_to_sequence instance_norm l1_l2_regularizer l1_regularizer l2_regularizer layer_norm "
    "legacy_fully_connected legacy_linear legacy_relu linear max_pool2d max_pool3d maxout one_hot_encoding "
    "optimize_loss recompute_grad relu relu6 repeat rev_block scale_gradient separable_conv2d "
    "separable_convolution2d sequence_to_images softmax spatial_softmax stack sum_regularizer "
    "summarize_activation summarize_activations summarize_collection summarize_tensor summarize_tensors "
    "unit_norm variance_scaling_initializer xavier_initializer xavier_initializer_conv2d"
)
_VARIABLES = (
    "VariableDeviceChooser add_arg_scope add_model_variable arg_scope arg_scoped_arguments "
    "assert_global_step assert_or_get_global_step assign_from_checkpoint assign_from_checkpoint_fn "
    "assign_from_values assign_from_values_fn create_global_step current_arg_scope filter_variables "
    "get_global_step get_local_variables get_model_variables get_or_create_global_step "
    "get_trainable_variables get_unique_variable get_variable_full_name get_variables get_variables_by_name "
    "get_variables_by_suffix get_variables_to_restore global_variable has_arg_scope local_variable "
    "model_variable variable"
)
_LOSSES = (
    "absolute_difference add_loss compute_weighted_loss cosine_distance get_losses get_regularization_losses "
    "get_total_loss hinge_loss log_loss mean_pairwise_squared_error mean_squared_error sigmoid_cross_entropy "
    "softmax_cross_entropy sparse_softmax_cross_entropy"
)
_METRICS = (
    "accuracy aggregate_metric_map aggregate_metrics auc_using_histogram auc_with_confidence_intervals "
    "cohen_kappa count f1_score precision_at_recall precision_recall_at_equal_thresholds recall_at_precision "
    "sparse_recall_at_top_k streaming_accuracy streaming_auc streaming_concat streaming_covariance "
    "streaming_curve_points streaming_dynamic_auc streaming_false_negative_rate "
    "streaming_false_negative_rate_at_thresholds streaming_false_negatives "
    "streaming_false_negatives_at_thresholds streaming_false_positive_rate "
    "streaming_false_positive_rate_at_thresholds streaming_false_positives "
    "streaming_false_positives_at_thresholds streaming_mean streaming_mean_absolute_error "
    "streaming_mean_cosine_distance streaming_mean_iou streaming_mean_relative_error "
    "streaming_mean_squared_error streaming_mean_tensor streaming_pearson_correlation "
    "streaming_percentage_less streaming_precision streaming_precision_at_thresholds streaming_recall "
    "streaming_recall_at_k streaming_recall_at_thresholds streaming_root_mean_squared_error "
    "streaming_sensitivity_at_specificity streaming_sparse_average_precision_at_k "
    "streaming_sparse_average_precision_at_top_k streaming_sparse_precision_at_k "
    "streaming_sparse_precision_at_top_k streaming_sparse_recall_at_k streaming_specificity_at_sensitivity "
    "streaming_true_negatives streaming_true_negatives_at_thresholds streaming_true_positives "
    "streaming_true_positives_at_thresholds"
)
# contrib.slim.layers was the module of the layer functions (conv2d, ...), not the whole package.
_LAYER_FUNCTIONS = (
    "GDN avg_pool2d avg_pool3d batch_norm bias_add conv1d conv2d conv2d_in_plane conv2d_transpose conv3d "
    "conv3d_transpose convolution convolution1d convolution2d convolution2d_in_plane convolution2d_transpose "
    "convolution3d convolution3d_transpose dense_to_sparse dropout elu flatten fully_connected gdn "
    "images_to_sequence layer_norm legacy_fully_connected legacy_linear legacy_relu linear max_pool2d "
    "max_pool3d maxout one_hot_encoding relu relu6 repeat scale_gradient separable_conv2d "
    "separable_convolution2d sequence_to_images softmax spatial_softmax stack unit_norm"
)
_module("contrib.slim", SLIM)
_add("contrib.slim", SLIM, f"{_LAYERS} {_VARIABLES} adaptive_clipping_fn arg_scope_func_key bucketize pool")
_add("contrib.slim", SLIM, "summarize_biases summarize_variables summarize_weights")
_add(
    "contrib.slim",
    SLIM,
    "data_decoder data_provider dataset dataset_data_provider evaluation learning model_analyzer "
    "parallel_reader prefetch_queue queues summaries tfexample_decoder",
    Covers.ALL,
)
_add("contrib.slim", SLIM, "layers losses metrics", Covers.LISTED)
_add("contrib.slim.layers", SLIM.child("layers"), _LAYER_FUNCTIONS)
_add("contrib.slim.losses", SLIM.child("losses"), _LOSSES)
_add("contrib.slim.metrics", SLIM.child("metrics"), _METRICS)
# tf_slim.layers, as an attribute, is the module of the layer functions (as contrib.slim.layers was);
# tf_slim itself has all of contrib.layers' names.
_module("contrib.layers", SLIM)
_add("contrib.layers", SLIM, _LAYERS)
_add("contrib.framework", SLIM, _VARIABLES)
_module("contrib.losses", SLIM.child("losses"))
_add("contrib.losses", SLIM.child("losses"), _LOSSES)
_add("contrib.losses", SLIM.child("losses"), "metric_learning", Covers.ALL)
_module("contrib.metrics", SLIM.child("metrics"))
_add("contrib.metrics", SLIM.child("metrics"), _METRICS)

# contrib.slim.nets: the model definitions, same variable names (their checkpoints load).
_NETS = {
    "alexnet": "alexnet_v2 alexnet_v2_arg_scope",
    "inception_v1": "inception_v1 inception_v1_arg_scope inception_v1_base",
    "inception_v2": "inception_v2 inception_v2_arg_scope inception_v2_base",
    "inception_v3": "inception_v3_arg_scope inception_v3_base",
    "overfeat": "overfeat overfeat_arg_scope",
    "resnet_utils": "Block conv2d_same resnet_arg_scope stack_blocks_dense subsample",
    "resnet_v1": "bottleneck resnet_arg_scope resnet_v1 resnet_v1_101 resnet_v1_152 resnet_v1_200 "
    "resnet_v1_50 resnet_v1_block",
    "resnet_v2": "bottleneck resnet_arg_scope resnet_v2 resnet_v2_101 resnet_v2_152 resnet_v2_200 "
    "resnet_v2_50 resnet_v2_block",
    "vgg": "vgg_16 vgg_19 vgg_a vgg_arg_scope vgg_d vgg_e",
}
_module("contrib.slim.nets", SLIM_NETS)
for _net, _names in _NETS.items():
    _add("contrib.slim.nets", SLIM_NETS, _net, Covers.LISTED)
    _add(f"contrib.slim.nets.{_net}", SLIM_NETS.child(_net), _names)
# tf-slim's inception_v3 takes create_aux_logits before scope.
_add("contrib.slim.nets.inception_v3", SLIM_NETS.child("inception_v3"), "inception_v3", max_positional=9)

# Where tf_upgrade_v2 writes another home (one that behaves differently) or only flags the name.
_KERAS_INIT = (
    "tf_upgrade_v2 writes tf.compat.v1.keras.initializers.VarianceScaling (tf-keras in TensorFlow 2.21), "
    "with other argument names; its truncated normal has stddev sqrt(scale / n) / 0.8796 where "
    "contrib's had sqrt(1.3 * factor / n)"
)
_NOTES = {
    "contrib.layers.l2_regularizer": "tf_upgrade_v2 writes tf.keras.regularizers.l2(0.5 * scale), which "
    "drops `scope` and is Keras 3's in TensorFlow 2.21",
    "contrib.layers.l1_regularizer": "tf_upgrade_v2 writes tf.keras.regularizers.l1, which drops `scope` and "
    "is Keras 3's in TensorFlow 2.21",
    "contrib.layers.variance_scaling_initializer": _KERAS_INIT,
    "contrib.layers.xavier_initializer": f"{_KERAS_INIT} (the default, uniform=True, draws alike)",
    "contrib.layers.xavier_initializer_conv2d": f"{_KERAS_INIT} (the default, uniform=True, draws alike)",
    "contrib.layers.recompute_grad": "tf_upgrade_v2 writes tf.recompute_grad, which has no use_data_dep or "
    "tupleize_grads and handles variables differently",
    "contrib.layers.layer_norm": "tf_upgrade_v2 only flags it (tf.keras LayerNormalization differs)",
    "contrib.layers.maxout": "tf_upgrade_v2 sends it to TensorFlow Addons, which has ended",
    "contrib.layers.group_norm": "tf_upgrade_v2 sends it to TensorFlow Addons, which has ended",
    "contrib.layers.instance_norm": "tf_upgrade_v2 sends it to TensorFlow Addons, which has ended",
    "contrib.cluster_resolver.UnionClusterResolver": "tf_upgrade_v2 writes TensorFlow 2's name, "
    "tf.distribute.cluster_resolver.UnionClusterResolver; tf.compat.v1 calls the class UnionResolver",
}

# TensorFlow Probability: contrib.distributions' names that kept their arguments and defaults. Where
# TFP added a parameter among them, only calls passing fewer arguments by position are rewritten.
_module("contrib.distributions", TFD)
_add(
    "contrib.distributions",
    TFD,
    "Autoregressive BatchReshape Bernoulli Binomial Cauchy Chi2 Deterministic DirichletMultinomial "
    "Distribution FULLY_REPARAMETERIZED HalfNormal Kumaraswamy Laplace Logistic Multinomial "
    "MultivariateNormalFullCovariance NOT_REPARAMETERIZED Normal OneHotCategorical "
    "PoissonLogNormalQuadratureCompound QuantizedDistribution RegisterKL RelaxedBernoulli "
    "ReparameterizationType SinhArcsinh StudentT Uniform VectorDeterministic "
    "kl_divergence normal_conjugates_known_scale_posterior normal_conjugates_known_scale_predictive "
    "quadrature_scheme_lognormal_gauss_hermite quadrature_scheme_lognormal_quantiles",
)
for _names, _n in (
    ("Exponential", 1),
    ("Gamma Geometric MixtureSameFamily Poisson", 2),
    ("Categorical Dirichlet Independent", 3),
    ("Beta MultivariateNormalTriL", 4),
    ("NegativeBinomial", 5),
):
    _add("contrib.distributions", TFD, _names, max_positional=_n)
_add(
    "contrib.distributions",
    TFD,
    "MultivariateNormalDiag",
    max_positional=2,
    unsupported=("scale_identity_multiplier",),
)
_add("contrib.distributions", TFD, "Mixture", max_positional=4, unsupported=("use_static_graph",))
_add(
    "contrib.distributions",
    TFD,
    "RelaxedOneHotCategorical ExpRelaxedOneHotCategorical",
    max_positional=3,
    unsupported=("dtype",),
)
_module("contrib.distributions.bijectors", TFB)
_add(
    "contrib.distributions.bijectors",
    TFB,
    "AbsoluteValue BatchNormalization Exp FillTriangular Identity MatrixInverseTriL SoftmaxCentered Softsign "
    "Square TransformDiagonal masked_autoregressive_default_template masked_dense real_nvp_default_template",
)
_add("contrib.distributions.bijectors", TFB, "Sigmoid CholeskyOuterProduct", max_positional=0)
_add("contrib.distributions.bijectors", TFB, "Permute Softplus", max_positional=1)
_add("contrib.distributions.bijectors", TFB, "Chain Invert PowerTransform", max_positional=2)

# TensorFlow itself: the homes TF 1.15 already gave these names (tf_upgrade_v2's renames).
_module("contrib.framework.nest", V1.child("nest"))
_add(
    "contrib.framework.nest",
    V1.child("nest"),
    "assert_same_structure flatten is_nested map_structure pack_sequence_as",
)
_add("contrib.framework", V1, "CriticalSection TensorSpec argsort is_tensor sort")
_add(
    "contrib.framework",
    V1.child("train"),
    "load_variable list_variables",
    renamed=(("checkpoint_dir", "ckpt_dir_or_file"),),
)
_add(
    "contrib.framework", V1.child("train"), "load_checkpoint", renamed=(("filepattern", "ckpt_dir_or_file"),)
)
_RNN_CELLS = (
    "BasicLSTMCell BasicRNNCell DeviceWrapper DropoutWrapper GRUCell LSTMCell LSTMStateTuple MultiRNNCell "
    "RNNCell ResidualWrapper"
)
_add("contrib.rnn", V1.child("nn.rnn_cell"), _RNN_CELLS)
_add("contrib.rnn", V1.child("nn"), "static_bidirectional_rnn static_rnn static_state_saving_rnn")
_DATA = (
    "AUTOTUNE Counter CsvDataset Optional RandomDataset Reducer SqlDataset TFRecordWriter "
    "bucket_by_sequence_length choose_from_datasets copy_to_device dense_to_sparse_batch enumerate_dataset "
    "get_next_as_optional get_single_element group_by_reducer group_by_window ignore_errors "
    "make_batched_features_dataset make_csv_dataset make_saveable_from_iterator map_and_batch "
    "parallel_interleave parse_example_dataset prefetch_to_device rejection_resample sample_from_datasets "
    "scan shuffle_and_repeat unbatch unique"
)
_add("contrib.data", V1.child("data.experimental"), _DATA)
_add("contrib.util", V1, "constant_value:get_static_value make_ndarray make_tensor_proto")
_add("contrib.training", V1.child("train"), "checkpoints_iterator")
_add("contrib.batching", V1, "batch_function:nondifferentiable_batch_function")
_add(
    "contrib.tpu",
    V1.child("tpu"),
    "CrossShardOptimizer batch_parallel bfloat16_scope core cross_replica_sum initialize_system "
    "outside_compilation replicate rewrite shard shutdown_system",
)
_add(
    "contrib.cluster_resolver",
    V1.child("distribute.cluster_resolver"),
    "ClusterResolver GCEClusterResolver GceClusterResolver:GCEClusterResolver KubernetesClusterResolver "
    "SimpleClusterResolver TFConfigClusterResolver TPUClusterResolver UnionClusterResolver:UnionResolver",
)
_add(
    "contrib.distribute",
    V1.child("distribute"),
    "CrossDeviceOps ReductionToOneDeviceCrossDeviceOps:ReductionToOneDevice",
)
_add("contrib.summary", V1.child("summary"), "all_summary_ops:all_v2_summary_ops initialize")
_add(
    "contrib.eager",
    V1,
    "GradientTape TensorSpec custom_gradient enable_eager_execution executing_eagerly "
    "in_eager_mode:executing_eagerly py_func:py_function",
)

# No exact home: reported with the nearest replacement.
_ADDONS = "tf_upgrade_v2 sends it to TensorFlow Addons, which has ended (no release for TensorFlow 2.21)"
_SUMMARY = (
    "TensorFlow 2's summaries take an explicit `step` and no `family`, and write only inside a default "
    "writer's as_default(); in graph mode towerpack's callbacks write tf.compat.v1.summary ops"
)
NEAREST: dict[str, Nearest] = {
    "contrib.rnn.LSTMBlockCell": Nearest(
        "the same LSTM with the same variables (LSTMBlockCell's checkpoints load into it), without the "
        "fused kernel; use_peephole is spelled use_peepholes",
        "tensorflow.compat.v1.nn.rnn_cell.LSTMCell",
    ),
    "contrib.rnn.LSTMBlockFusedCell": Nearest(
        "an unfused cell run with tf.nn.dynamic_rnn, not one fused op over the whole sequence",
        "tensorflow.compat.v1.nn.rnn_cell.LSTMCell",
    ),
    "contrib.rnn.GRUBlockCell": Nearest(
        "the same GRU without the fused kernel; its variables w_ru, b_ru, w_c, b_c are gates/kernel, "
        "gates/bias, candidate/kernel, candidate/bias there",
        "tensorflow.compat.v1.nn.rnn_cell.GRUCell",
    ),
    "contrib.rnn.GRUBlockCellV2": Nearest(
        "the same GRU with the same variable names, without the fused kernel",
        "tensorflow.compat.v1.nn.rnn_cell.GRUCell",
    ),
    "contrib.rnn.LayerNormBasicLSTMCell": Nearest(
        f"{_ADDONS}; nothing maintained normalizes an LSTM cell's layers"
    ),
    "contrib.rnn.NASCell": Nearest(_ADDONS),
    "contrib.distributions.InverseGamma": Nearest(
        "contrib's `rate` was a scale: TFP calls it `scale`",
        "tensorflow_probability.distributions.InverseGamma",
    ),
    "contrib.distributions.TransformedDistribution": Nearest(
        "needs a bijector (contrib defaulted to the identity) and has no batch_shape or event_shape "
        "arguments (use tfp.distributions.Sample or BatchBroadcast)",
        "tensorflow_probability.distributions.TransformedDistribution",
    ),
    "contrib.distributions.NormalWithSoftplusScale": Nearest(
        "write Normal(loc, tf.nn.softplus(scale))", "tensorflow_probability.distributions.Normal"
    ),
    "contrib.distributions.MultivariateNormalDiagWithSoftplusScale": Nearest(
        "write MultivariateNormalDiag(loc, tf.nn.softplus(scale_diag))",
        "tensorflow_probability.distributions.MultivariateNormalDiag",
    ),
    "contrib.distributions.WishartCholesky": Nearest(
        "takes the Cholesky factor as scale_tril", "tensorflow_probability.distributions.WishartTriL"
    ),
    "contrib.cluster_resolver.SlurmClusterResolver": Nearest(
        "gpus_per_node and gpus_per_task default to None (read from Slurm's environment) where contrib "
        "assumed 1",
        "tensorflow.compat.v1.distribute.cluster_resolver.SlurmClusterResolver",
    ),
    "contrib.framework.init_from_checkpoint": Nearest(
        "its first argument is ckpt_dir_or_file, and it matches variables by tf.train.init_from_checkpoint's "
        "rules",
        "tensorflow.compat.v1.train.init_from_checkpoint",
    ),
    "contrib.framework.zero_initializer": Nearest(
        "an initializer given to get_variable instead of an op run on an existing variable",
        "tensorflow.compat.v1.zeros_initializer",
    ),
    "contrib.data.CheckpointInputPipelineHook": Nearest(
        "was a tf.estimator hook and tf.estimator is gone from TensorFlow 2.16; save the iterator with "
        "tf.data.experimental.make_saveable_from_iterator in a tf.train.Saver instead"
    ),
    "contrib.data.assert_element_shape": Nearest(
        "map the dataset with tf.ensure_shape on each component", "tensorflow.compat.v1.ensure_shape"
    ),
    "contrib.data.StatsAggregator": Nearest("tf.data's statistics API was removed from TensorFlow 2"),
    "contrib.data.latency_stats": Nearest("tf.data's statistics API was removed from TensorFlow 2"),
    "contrib.data.set_stats_aggregator": Nearest("tf.data's statistics API was removed from TensorFlow 2"),
    "contrib.data.batch_and_drop_remainder": Nearest(
        "dataset.batch(batch_size, drop_remainder=True)", "tensorflow.compat.v1.data.Dataset.batch"
    ),
    "contrib.saved_model.save_keras_model": Nearest(
        "tf-keras saves a SavedModel with tf_keras.models.save_model(model, path, save_format='tf')",
        "tf_keras.models.save_model",
    ),
    "contrib.saved_model.load_keras_model": Nearest(
        "tf-keras loads it with tf_keras.models.load_model(path)", "tf_keras.models.load_model"
    ),
    "contrib.training.GreedyLoadBalancingStrategy": Nearest(
        "replica_device_setter then places variables round-robin over the parameter servers instead of "
        "by size; towerpack's DistributedReplicatedTrainer places them itself",
        "tensorflow.compat.v1.train.replica_device_setter",
    ),
    "contrib.training.byte_size_load_fn": Nearest(
        "has no public replacement; it only served GreedyLoadBalancingStrategy"
    ),
    "contrib.memory_stats.MaxBytesInUse": Nearest(
        "reads the peak from the runtime instead of an op in the graph; towerpack.trainer.callbacks."
        "GPUMemoryTracker reports it per epoch",
        "tensorflow.config.experimental.get_memory_info",
    ),
    "contrib.memory_stats.BytesInUse": Nearest(
        "reads the current use from the runtime instead of an op in the graph",
        "tensorflow.config.experimental.get_memory_info",
    ),
    "contrib.eager.defun": Nearest(
        "TensorFlow 2's function decorator, with other arguments and retracing rules", "tensorflow.function"
    ),
}
for _name in (
    "MirroredStrategy",
    "OneDeviceStrategy",
    "CollectiveAllReduceStrategy",
    "ParameterServerStrategy",
):
    NEAREST[f"contrib.distribute.{_name}"] = Nearest(
        "TensorFlow 2's distribution strategies take other arguments and run eagerly; towerpack's "
        "trainers (SyncMultiGPUTrainerReplicated, HorovodTrainer, DistributedReplicatedTrainer) do this "
        "in graph mode"
    )
NEAREST["contrib.distribute.TPUStrategy"] = Nearest("TPUs are not supported by towerpack")
for _name, _to in {
    "all_summary_ops": None,
    "always_record_summaries": "record_if",
    "audio": "audio",
    "create_file_writer": "create_file_writer",
    "flush": "flush",
    "generic": "write",
    "graph": "graph",
    "histogram": "histogram",
    "image": "image",
    "import_event": None,
    "never_record_summaries": "record_if",
    "record_summaries_every_n_global_steps": "record_if",
    "scalar": "scalar",
}.items():
    if f"contrib.summary.{_name}" not in TABLE:
        NEAREST[f"contrib.summary.{_name}"] = Nearest(_SUMMARY, f"tensorflow.summary.{_to}" if _to else None)
_TO_ADDONS = """
    sparsemax.sparsemax sparsemax.sparsemax_loss opt.LazyAdamOptimizer opt.MovingAverageOptimizer
    opt.MomentumWOptimizer opt.AdamWOptimizer opt.extend_with_decoupled_weight_decay
    text.skip_gram_sample text.skip_gram_sample_with_text_vocab image.dense_image_warp
    image.adjust_hsv_in_yiq image.compose_transforms image.random_hsv_in_yiq
    image.angles_to_projective_transforms image.matrices_to_flat_transforms image.rotate image.transform
"""
for _path in _TO_ADDONS.split():
    NEAREST[f"contrib.{_path}"] = Nearest(_ADDONS)
# tf_upgrade_v2 sends these to TensorFlow Addons too; tf-slim has contrib's own code.
for _path in (
    "layers.poincare_normalize",  # in tf_slim.layers, the module of the layer functions
    "losses.metric_learning.contrastive_loss",
    "losses.metric_learning.lifted_struct_loss",
    "losses.metric_learning.triplet_semihard_loss",
):
    TABLE[f"contrib.{_path}"] = Rewrite(SLIM.child(_path), note=_ADDONS)

for _key, _note in _NOTES.items():
    _entry = TABLE[_key]
    assert isinstance(_entry, Rewrite)
    TABLE[_key] = dataclasses.replace(_entry, note=_note)
assert not set(TABLE) & set(NEAREST)
ENTRIES: dict[str, Entry] = {**TABLE, **NEAREST}


@dataclass(frozen=True)
class Found:
    """The entry for a path: ``key`` is the entry's path, ``rest`` the attributes that follow it."""

    key: str
    entry: Entry
    rest: tuple[str, ...]

    @property
    def rewrite(self) -> Rewrite | None:
        """The rewrite that covers the whole path, if any."""
        entry = self.entry
        if not isinstance(entry, Rewrite):
            return None
        if self.rest and entry.covers is Covers.LISTED:
            return None  # a member of the module with no entry of its own
        return entry

    def target(self) -> Target:
        """The new home of the whole path (only for a ``rewrite``)."""
        assert isinstance(self.entry, Rewrite)
        target = self.entry.target
        for name in self.rest:
            target = target.child(name)
        return target


def lookup(path: str) -> Found | None:
    """The entry for ``path`` (``contrib.layers.l2_regularizer``, ``contrib.slim.learning.train``): the
    longest key it starts with."""
    parts = path.split(".")
    for end in range(len(parts), 1, -1):
        entry = ENTRIES.get(".".join(parts[:end]))
        if entry is not None:
            return Found(".".join(parts[:end]), entry, tuple(parts[end:]))
    return None


def home_package(target: Target) -> str:
    """The distribution a target needs: what the report tells a user to install."""
    return target.module.split(".")[0]
