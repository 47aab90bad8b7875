//go:build luajit && cgo

package server_test

import "testing"

func TestPathologicalPatternLuaJIT(t *testing.T) { testPathologicalPattern(t, "luajit") }

func TestStuckScriptLuaJIT(t *testing.T) { testStuckScript(t, "luajit") }

func TestScriptMemoryLuaJIT(t *testing.T) { testScriptMemory(t, "luajit", 1200<<20) }
