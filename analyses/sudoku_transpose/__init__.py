"""Sudoku rows vs columns, decided: transposed data × data seeds × training seeds through symmetric and anisotropic models (issue 36 item 2)."""
