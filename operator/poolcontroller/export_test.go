package poolcontroller

// SetOnDecide has r call f as each node's decision starts, once its
// reads are done.
func SetOnDecide(r *Reconciler, f func(node string)) { r.onDecide = f }

// SetOnDecided has r call f as each node's decision ends, before the
// CiliumNode's write.
func SetOnDecided(r *Reconciler, f func(node string)) { r.onDecided = f }
