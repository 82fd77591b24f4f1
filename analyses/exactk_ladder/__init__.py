"""An exact-K ladder (k = 3, 9, 18 of 36 pixels) against parity G = 2, 3, 4 at one N and model, with the count
error |Σ bits − k| beside exact accuracy and the chance levels at initialisation (issue 36 item 4)."""
