"""The paper's remedies for large G: baseline vs --global-token, --multiplicative, --curriculum."""
