"""Data: the rules, datasets drawn from them, and lookups into datasets.

    rules.py       Parity, ExactK, RowK, LatinSquare, Sudoku; rule_from_spec
    datasets.py    Dataset, make_dataset, load_dataset, to_signed / to_bits, the endpoint states
    bitindex.py    BitIndex (exact and Hamming-nearest lookup) and bit packing
    datafile.py    checks of a dataset .npz before and after loading it
    curriculum.py  the curriculum over G: finer parity pieces and their images

Import the public names from `scoreprobe` directly.
"""
