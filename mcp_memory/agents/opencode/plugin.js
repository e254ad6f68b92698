// mcp-memory capture plugin for OpenCode 1.x (installed by `mcp-memory install opencode`).
// On `session.idle` (a turn has finished) it runs `<mcp-memory command> sync opencode --session <id>`
// in the background. It never throws into OpenCode: every failure is swallowed and logged.
// Plugin API: @opencode-ai/plugin 1.18.33 (`event` hook receiving every bus event).
import { spawn } from "node:child_process"

const COMMAND = /* mcp-memory:command */ ["mcp-memory"] /* end */
const ENV = /* mcp-memory:env */ {} /* end */

const running = new Map() // sessionID -> true while a sync runs; "again" when another idle came in

function log(client, level, message) {
  try {
    const done = client?.app?.log?.({ body: { service: "mcp-memory", level, message } })
    if (done && typeof done.catch === "function") done.catch(() => {})
  } catch {
    // logging must not fail the plugin either
  }
}

function sync(client, sessionID) {
  if (running.has(sessionID)) {
    running.set(sessionID, "again")
    return
  }
  running.set(sessionID, true)
  let stderr = ""
  const finish = (problem) => {
    if (problem) log(client, "warn", `sync of ${sessionID} failed: ${problem}`)
    const again = running.get(sessionID) === "again"
    running.delete(sessionID)
    if (again) sync(client, sessionID)
  }
  try {
    const [program, ...args] = COMMAND
    const child = spawn(program, [...args, "sync", "opencode", "--session", sessionID], {
      env: { ...process.env, ...ENV },
      stdio: ["ignore", "ignore", "pipe"],
    })
    child.stderr.on("data", (chunk) => {
      stderr = (stderr + chunk).slice(-2000)
    })
    child.on("error", (error) => finish(String(error?.message ?? error)))
    child.on("close", (code) => finish(code === 0 ? null : `exit ${code}: ${stderr.trim()}`))
  } catch (error) {
    finish(String(error?.message ?? error))
  }
}

export const McpMemoryCapture = async ({ client }) => ({
  event: async ({ event }) => {
    try {
      const sessionID = event?.properties?.sessionID
      if (event?.type === "session.idle" && typeof sessionID === "string") sync(client, sessionID)
    } catch (error) {
      log(client, "warn", `capture hook failed: ${String(error?.message ?? error)}`)
    }
  },
})
