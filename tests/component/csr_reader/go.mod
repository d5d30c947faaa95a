module dynamic-scoring/tests/component/csr_reader

go 1.26.0
