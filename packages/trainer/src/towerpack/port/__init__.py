"""towerpack.port: ``towerpack port``, the codemod that moves a tensorpack (0.11) project to towerpack.

The reference map (``reference_map``) says where every tensorpack module and name lives here; the
rewriters apply it with libcst (keeping formatting and comments), and the report lists what needs a
person. Nothing here imports TensorFlow or towerpack.trainer when loaded.
"""
