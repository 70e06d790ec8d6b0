package bad

func helper(m *machine) int { return m.n }
