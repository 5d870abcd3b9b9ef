"""Z3 proof obligations over the model's encoding."""
