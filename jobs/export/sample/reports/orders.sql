-- title: Orders in a period
-- source: shop
-- param: from date "From" = 2025-01-01
-- param: to date "To (exclusive)" = 2025-02-01
-- sheet: Orders
-- count: true
-- Every order placed in [from, to), with its customer and product.
SELECT o.id, o.created_at, c.name AS customer, c.country, p.name AS product, p.category,
       o.quantity, o.unit_price, o.total, o.status, o.paid, o.note
FROM orders o
JOIN customers c ON c.id = o.customer_id
JOIN products p ON p.id = o.product_id
WHERE o.created_at >= :from AND o.created_at < :to
ORDER BY o.id;
