// mcp-memory capture plugin for OpenCode 1.x (installed by `mcp-memory install opencode`; Kilo Code, an
// OpenCode fork, loads the same plugin, installed by `mcp-memory install kilo`).
// On `session.idle` (a turn has finished) it runs `<mcp-memory command> sync opencode --session <id>`
// in the background. Before a session's model requests it adds the project's memory to the system
// prompt: `<mcp-memory command> recall --hook --agent opencode` runs once per session (stdin
// `{"cwd": <directory>}`, stdout `{"system": TEXT}`) and TEXT is appended to `output.system`.
// It never throws into OpenCode: every failure is swallowed and logged.
// Plugin API: @opencode-ai/plugin 1.18.33 (`event` hook receiving every bus event;
// `experimental.chat.system.transform(input {sessionID, model}, output {system: string[]})`, called by
// LLMRequestPrep.prepare before every model request).
import { spawn } from "node:child_process"

const COMMAND = /* mcp-memory:command */ ["mcp-memory"] /* end */
const ENV = /* mcp-memory:env */ {} /* end */
const AGENT = /* mcp-memory:agent */ "opencode" /* end */ // the agent name of `sync` and `recall --agent`

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
    const child = spawn(program, [...args, "sync", AGENT, "--session", sessionID], {
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

const RECALL_TIMEOUT_MS = 10000
const RECALLS_KEPT = 200
const recalls = new Map() // sessionID -> Promise of the recall text ("" when there is none)

function runRecall(client, directory) {
  return new Promise((resolve) => {
    let stdout = ""
    let child
    const timer = setTimeout(() => {
      log(client, "warn", "recall took too long; the session starts without it")
      try {
        child?.kill()
      } catch {
        // already gone
      }
      resolve("")
    }, RECALL_TIMEOUT_MS)
    const done = (text) => {
      clearTimeout(timer)
      resolve(text)
    }
    try {
      const [program, ...args] = COMMAND
      child = spawn(program, [...args, "recall", "--hook", "--agent", AGENT], {
        env: { ...process.env, ...ENV },
        stdio: ["pipe", "pipe", "ignore"],
      })
      child.stdout.on("data", (chunk) => {
        stdout = (stdout + chunk).slice(-200000)
      })
      child.on("error", (error) => {
        log(client, "warn", `recall failed: ${String(error?.message ?? error)}`)
        done("")
      })
      child.on("close", () => {
        try {
          const text = stdout.trim() ? JSON.parse(stdout).system : ""
          done(typeof text === "string" ? text : "")
        } catch {
          done("")
        }
      })
      child.stdin.on("error", () => {})
      child.stdin.end(JSON.stringify({ cwd: directory }))
    } catch (error) {
      log(client, "warn", `recall failed: ${String(error?.message ?? error)}`)
      done("")
    }
  })
}

function recall(client, directory, sessionID) {
  if (!recalls.has(sessionID)) {
    if (recalls.size >= RECALLS_KEPT) recalls.delete(recalls.keys().next().value)
    recalls.set(sessionID, runRecall(client, directory))
  }
  return recalls.get(sessionID)
}

export const McpMemoryCapture = async ({ client, directory }) => ({
  event: async ({ event }) => {
    try {
      const sessionID = event?.properties?.sessionID
      if (event?.type === "session.idle" && typeof sessionID === "string") sync(client, sessionID)
    } catch (error) {
      log(client, "warn", `capture hook failed: ${String(error?.message ?? error)}`)
    }
  },
  "experimental.chat.system.transform": async (input, output) => {
    try {
      const sessionID = input?.sessionID
      if (typeof sessionID !== "string" || !Array.isArray(output?.system)) return
      const text = await recall(client, typeof directory === "string" ? directory : process.cwd(), sessionID)
      if (text) output.system.push(text)
    } catch (error) {
      log(client, "warn", `recall hook failed: ${String(error?.message ?? error)}`)
    }
  },
})
