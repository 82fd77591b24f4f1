"""The mechanism on trained seeds: basins, retention and the DSM split over training, on three training seeds
of an open- and a closed-window series, trained models and units crossed (issue 36 item 3)."""
