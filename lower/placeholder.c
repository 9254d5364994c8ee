int tj_lower_placeholder_;
