"""The tools a user runs that are not a package of their own: the verdict matrix of
``pcspec verify`` (``verdicts``), the generated documents (``docgen``, ``specgen``), slot files
written by the model (``slotfile_writer``), a variant of one's own (``user_variant``)."""
