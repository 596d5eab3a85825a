module statestore/bench/overload

go 1.22
