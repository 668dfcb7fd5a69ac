"""OpenSSH sshd test peer (session fixture)."""
