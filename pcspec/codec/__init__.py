"""The slot-file state codec: the sequence state inside a slot file as llama.cpp's memories
write it, byte for byte. ``layout``: the KV, iSWA, recurrent and hybrid layouts of
state-sequence versions 3 and 4, as data, and their writer (``encode_state``); ``reader``: a
state of unknown memory kind read back (``parse_state``), a cut or an overwritten field
reported at its byte; ``ggml_types``: the tensor types a state's row headers name.

The model never calls it: its slot files hold a symbolic state (``pcspec.model.slotfile``
delimits a state without reading it). ``pcspec slotfile inspect`` reads real files with it
(``pcspec.commands.slotfile``, ``pcspec.tools.state_report``). It imports the model's errors
and nothing else of pcspec."""
