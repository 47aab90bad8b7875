package table

const crashChildEnv = "SLUICE_TABLE_CRASH_CHILD"

func crashChild(dir string) {}
