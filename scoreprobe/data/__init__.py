"""Data: the rules, datasets drawn from them, and lookups into datasets.

    rules.py       Parity, ExactK, RowK and the registry (RULES, rule_from_spec); re-exports the two below
    rulebase.py    Rule, the base class, and the bit / argument checks every rule shares
    grids.py       LatinSquare, Sudoku (one-hot grid rules), grids_to_bits, the Latin / Sudoku counts
    datasets.py    Dataset, make_dataset, load_dataset, transposed_dataset, to_signed / to_bits, the endpoint states
    bitindex.py    BitIndex (exact and Hamming-nearest lookup) and bit packing
    datafile.py    checks of a dataset .npz before and after loading it
    curriculum.py  the curriculum over G: finer parity pieces and their images

Import the public names from `scoreprobe` directly.
"""
