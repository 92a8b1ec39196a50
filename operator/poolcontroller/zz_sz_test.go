package poolcontroller
import ("testing";"unsafe")
func TestSz(t *testing.T){ t.Log(unsafe.Sizeof(memory{})) }
