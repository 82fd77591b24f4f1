"""Inside the network: which blocks, sub-blocks and heads carry the rule and the copies (activation patching)."""
