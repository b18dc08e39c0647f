int b_sym(void) { return 42; }
