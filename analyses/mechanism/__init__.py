"""The mechanism, measured: basins, retention and the DSM split over training, for an open and a closed window."""
