package poolcontroller

// SetOnDecide has r call f as each node's decision starts, once its
// reads are done.
func SetOnDecide(r *Reconciler, f func(node string)) { r.onDecide = f }
