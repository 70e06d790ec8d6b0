package bad

func (m *machine) notMarked() int { return m.n } // want: placement
