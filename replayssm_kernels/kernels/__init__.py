"""The Helion kernel bodies, one launch per module, and the device helpers they share (``common``).

Each module holds one body and the typed record of its arguments (``*Args``, made from the body's
signature by ``common.args_record``, so the call is by name); ``replayssm_kernels.plan`` builds the
records and ``replayssm_kernels.decode`` runs them.
"""
