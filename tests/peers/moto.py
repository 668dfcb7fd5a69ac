"""moto S3 server test peer (session fixture)."""
