<#
.SYNOPSIS
  Install mcp-memory on a Windows host of a team: an isolated environment (pipx, else a venv under
  %LOCALAPPDATA%\mcp-memory\venv), `mcp-memory login` against the central database, registration
  with every agent found on PATH, and optionally the archiver as a scheduled task.

.EXAMPLE
  powershell -ExecutionPolicy Bypass -File install\install.ps1 -Dsn "postgresql://host-a@db.example.internal/mcp_memory"

.EXAMPLE
  Get-Content token.txt | powershell -File install\install.ps1 -Dsn "postgresql://host-a@db/mem" -TokenStdin -PgBouncer
#>
[CmdletBinding()]
param(
    [string]$Dsn = "",
    [switch]$TokenStdin,
    [switch]$PgBouncer,
    [switch]$Archiver,
    [switch]$NoAgents,
    [switch]$DryRun,
    [string]$Source = "mcp-memory"
)
$ErrorActionPreference = "Stop"
$Venv = Join-Path $env:LOCALAPPDATA "mcp-memory\venv"

function Invoke-Step([string]$Exe, [string[]]$Arguments) {
    Write-Host "+ $Exe $($Arguments -join ' ')"
    if (-not $DryRun) {
        & $Exe @Arguments
        if ($LASTEXITCODE -ne 0) { throw "$Exe failed with exit code $LASTEXITCODE" }
    }
}

function Install-Package {
    if (Get-Command pipx -ErrorAction SilentlyContinue) {
        Invoke-Step "pipx" @("install", "--force", $Source)
        $found = Get-Command mcp-memory -ErrorAction SilentlyContinue
        if ($found) { return $found.Source }
        return (Join-Path $env:USERPROFILE ".local\bin\mcp-memory.exe")
    }
    if (Get-Command py -ErrorAction SilentlyContinue) {
        Invoke-Step "py" @("-3", "-m", "venv", $Venv)
    } else {
        Invoke-Step "python" @("-m", "venv", $Venv)
    }
    Invoke-Step (Join-Path $Venv "Scripts\python.exe") @("-m", "pip", "install", "--quiet", "--upgrade", "pip")
    Invoke-Step (Join-Path $Venv "Scripts\python.exe") @("-m", "pip", "install", "--quiet", "--upgrade", $Source)
    Write-Host "Add $(Join-Path $Venv 'Scripts') to PATH for agents to find mcp-memory.exe"
    return (Join-Path $Venv "Scripts\mcp-memory.exe")
}

function Invoke-Login([string]$Mcp) {
    if (-not $Dsn) {
        Write-Host "no -Dsn: this host keeps the embedded database (single-user)"
        return
    }
    $arguments = @("login", "--dsn", $Dsn)
    if ($PgBouncer) { $arguments += "--pgbouncer" }
    if ($TokenStdin) {
        $arguments += "--token-stdin"
        Write-Host "+ $Mcp $($arguments -join ' ') (token from standard input)"
        if (-not $DryRun) {
            $input | & $Mcp @arguments
            if ($LASTEXITCODE -ne 0) { throw "mcp-memory login failed" }
        }
        return
    }
    Invoke-Step $Mcp $arguments
}

function Register-Agents([string]$Mcp) {
    if ($NoAgents) { return }
    $agents = [ordered]@{ "claude-code" = "claude"; "opencode" = "opencode"; "codex" = "codex";
                          "gemini" = "gemini"; "hermes" = "hermes" }
    foreach ($agent in $agents.Keys) {
        if (Get-Command $agents[$agent] -ErrorAction SilentlyContinue) {
            try { Invoke-Step $Mcp @("install", $agent) } catch { Write-Warning "could not register with ${agent}: $_" }
        } else {
            Write-Host "skip ${agent}: '$($agents[$agent])' not found on PATH"
        }
    }
}

function Register-Archiver([string]$Mcp) {
    if (-not $Archiver) { return }
    Write-Host "archiver: a scheduled task that runs '$Mcp archive --daemon' at startup (install\windows-archive-task.md)"
    if ($DryRun) { return }
    $action = New-ScheduledTaskAction -Execute $Mcp -Argument "archive --daemon"
    $trigger = New-ScheduledTaskTrigger -AtStartup
    $settings = New-ScheduledTaskSettingsSet -RestartCount 999 -RestartInterval (New-TimeSpan -Minutes 1) `
        -ExecutionTimeLimit ([TimeSpan]::Zero) -StartWhenAvailable
    # as this account, with its password: the task then runs at startup without a logon and reads the
    # token `mcp-memory login` stored in this account's Credential Manager
    $account = Get-Credential -UserName "$env:USERDOMAIN\$env:USERNAME" -Message "the archiver task runs as this account"
    Register-ScheduledTask -TaskName "mcp-memory archiver" -Action $action -Trigger $trigger -Settings $settings `
        -User $account.UserName -Password $account.GetNetworkCredential().Password -RunLevel Limited `
        -Description "mcp-memory git archiver" -Force | Out-Null
    Write-Host "archiver: set [archive] repo and remote in $(Join-Path $env:LOCALAPPDATA 'mcp-memory\config.toml'), then: Start-ScheduledTask -TaskName 'mcp-memory archiver'"
}

$mcp = Install-Package
Invoke-Login $mcp
Register-Agents $mcp
Register-Archiver $mcp
try { Invoke-Step $mcp @("doctor") } catch { Write-Warning "'mcp-memory doctor' reported problems (see above)" }
Write-Host "done."
