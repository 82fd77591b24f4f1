"""How well AtP and AtP* rank the sites that real patching ranks, over noise draws (issue 55 item 6)."""
