int tj_jit_placeholder_;
